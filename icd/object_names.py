"""Commands that name an object by (type, handle): debug names and tags, debug-marker names and tags,
private data. The driver answers them itself for the objects it emulates.

Role: the driver emulates some objects (objects.EmulatedObject: tensors, tensor views, shader
instrumentation objects, tensor descriptor update templates); their handles are its own, and a
backend dereferences the handle these commands carry (Mesa keeps names and private data in its
object base), so one of them passed down crashes the process. ARCHITECTURE.md decision 2: no
command that names an object may pass an emulated one to the backend. Here, a call naming one of
the device's emulated objects is answered by the driver, which keeps the name, the tag and the
private data on the object (EmulatedObject.debug_name, .tag, .private_data: the trace can name it);
every other call is forwarded unchanged (a backend object's debug name is also remembered in
Device.object_names). When the backend lacks a debug-utils or debug-marker command (extensions the
driver provides itself) the driver answers it for every object.

Which commands: every command vk.xml marks as naming an object (vkconst OBJECT_NAMING, from the
objectType attributes), except those vkapi/intercepts.py OBJECT_NAMING_FORWARDED lists with their
reason; intercepts.py gives each a row. vkDestroyPrivateDataSlot forgets the slot's values.

An object is the driver's when its handle is one of the device's emulated objects and the call's
object type is that object's type (or VK_OBJECT_TYPE_UNKNOWN / VK_DEBUG_REPORT_OBJECT_TYPE_UNKNOWN_EXT,
which debug markers must use for types VkDebugReportObjectTypeEXT lacks, such as tensors).

Threads: names and tags are set under the application's synchronisation of the object (Vulkan's
externsync); private data may be set from any thread: one dict assignment, atomic under the GIL.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import Device, EmulatedObject

UNKNOWN = 0   # VK_OBJECT_TYPE_UNKNOWN and VK_DEBUG_REPORT_OBJECT_TYPE_UNKNOWN_EXT
# VkDebugReportObjectTypeEXT -> VkObjectType: the same suffix names the same type (vk.xml).
_REPORT_TO_OBJECT = {
    getattr(vk, name): getattr(vk, "VK_OBJECT_TYPE_" + name.removeprefix("VK_DEBUG_REPORT_OBJECT_TYPE_")
                                                         .removesuffix("_EXT"), None)
    for name in dir(vk) if name.startswith("VK_DEBUG_REPORT_OBJECT_TYPE_") and name.endswith("_EXT")}


def emulated(dev: Device, object_type: int, handle) -> EmulatedObject | None:
    """The device's emulated object this (type, handle) names, or None (the backend's)."""
    obj = dev.emulated.get(int(handle))
    if obj is not None and object_type in (UNKNOWN, obj.OBJECT_TYPE):
        return obj
    return None


class ObjectNames:
    """The hooks: one method per command, named after it."""

    COMMANDS = ("vkSetDebugUtilsObjectNameEXT", "vkSetDebugUtilsObjectTagEXT", "vkDebugMarkerSetObjectNameEXT",
                "vkDebugMarkerSetObjectTagEXT", "vkSetPrivateData", "vkGetPrivateData", "vkDestroyPrivateDataSlot")

    def __init__(self, drv: Driver) -> None:
        self.ffi, self.objects = drv.ffi, drv.objects

    def device(self, handle) -> Device:
        return self.objects.get(handle, Device)

    def vkSetDebugUtilsObjectNameEXT(self, device, pNameInfo):
        dev = self.device(device)
        name = structs.string(self.ffi, pNameInfo.pObjectName) if pNameInfo.pObjectName != self.ffi.NULL else None
        obj = emulated(dev, pNameInfo.objectType, pNameInfo.objectHandle)
        if obj is not None:
            obj.debug_name = name
            return vk.VK_SUCCESS
        dev.object_names[int(pNameInfo.objectHandle)] = name or ""
        forward = dev.next.vkSetDebugUtilsObjectNameEXT
        return forward(device, pNameInfo) if forward is not None else vk.VK_SUCCESS

    def vkSetDebugUtilsObjectTagEXT(self, device, pTagInfo):
        dev = self.device(device)
        obj = emulated(dev, pTagInfo.objectType, pTagInfo.objectHandle)
        if obj is not None:
            obj.tag = (int(pTagInfo.tagName), bytes(self.ffi.buffer(pTagInfo.pTag, pTagInfo.tagSize)))
            return vk.VK_SUCCESS
        forward = dev.next.vkSetDebugUtilsObjectTagEXT
        return forward(device, pTagInfo) if forward is not None else vk.VK_SUCCESS

    def vkDebugMarkerSetObjectNameEXT(self, device, pNameInfo):
        dev = self.device(device)
        name = structs.string(self.ffi, pNameInfo.pObjectName)
        obj = emulated(dev, _REPORT_TO_OBJECT.get(pNameInfo.objectType), pNameInfo.object)
        if obj is not None:
            obj.debug_name = name
            return vk.VK_SUCCESS
        dev.object_names[int(pNameInfo.object)] = name
        forward = dev.next.vkDebugMarkerSetObjectNameEXT
        return forward(device, pNameInfo) if forward is not None else vk.VK_SUCCESS

    def vkDebugMarkerSetObjectTagEXT(self, device, pTagInfo):
        dev = self.device(device)
        obj = emulated(dev, _REPORT_TO_OBJECT.get(pTagInfo.objectType), pTagInfo.object)
        if obj is not None:
            obj.tag = (int(pTagInfo.tagName), bytes(self.ffi.buffer(pTagInfo.pTag, pTagInfo.tagSize)))
            return vk.VK_SUCCESS
        forward = dev.next.vkDebugMarkerSetObjectTagEXT
        return forward(device, pTagInfo) if forward is not None else vk.VK_SUCCESS

    # Vulkan spec 4.7 "Private Data": a value of a slot not set for an object reads as 0.
    def vkSetPrivateData(self, device, objectType, objectHandle, privateDataSlot, data):
        dev = self.device(device)
        obj = emulated(dev, objectType, objectHandle)
        if obj is None:
            return dev.next.vkSetPrivateData(device, objectType, objectHandle, privateDataSlot, data)
        if obj.private_data is None:
            obj.private_data = {}
        obj.private_data[int(privateDataSlot)] = int(data)
        return vk.VK_SUCCESS

    def vkGetPrivateData(self, device, objectType, objectHandle, privateDataSlot, pData):
        dev = self.device(device)
        obj = emulated(dev, objectType, objectHandle)
        if obj is None:
            dev.next.vkGetPrivateData(device, objectType, objectHandle, privateDataSlot, pData)
            return
        pData[0] = (obj.private_data or {}).get(int(privateDataSlot), 0)

    def vkDestroyPrivateDataSlot(self, device, privateDataSlot, pAllocator):
        """The slot's values go with it: a new slot may get the same handle and must read 0."""
        dev = self.device(device)
        slot = int(privateDataSlot)
        if slot:
            for obj in list(dev.emulated.values()):
                if obj.private_data:
                    obj.private_data.pop(slot, None)
        dev.next.vkDestroyPrivateDataSlot(device, privateDataSlot, pAllocator)


def register(drv: Driver) -> None:
    names = ObjectNames(drv)
    for command in ObjectNames.COMMANDS:
        drv.hooks.replace(command)(getattr(names, command))
