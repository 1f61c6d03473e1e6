"""Creates a device enabling what the command line asks, and prints, as JSON, vkCreateDevice's result
("VK_SUCCESS" or the error's name) and what the device reported for each asked feature first.

Arguments: NAME for a VkPhysicalDeviceFeatures member (enabled through pEnabledFeatures),
v12.NAME for a VkPhysicalDeviceVulkan12Features member (enabled through the pNext chain),
ext:NAME for a device extension, queues:N for N queues of family 0; image:FORMAT:USAGE (e.g.
image:R8G8B8A8_UNORM:STORAGE) also asks vkGetPhysicalDeviceImageFormatProperties and
vkGetPhysicalDeviceImageFormatProperties2 for a 2D optimal-tiling image, and prints their results;
proc:NAME asks the created device's vkGetDeviceProcAddr for NAME and prints whether it has it.

Run: .venv/bin/python tests/integration/apps/device_request.py fillModeNonSolid  (under `tessera run` or not)
"""
import json
import sys

import vulkan as vk

ERRORS = {vk.VkErrorFeatureNotPresent: "VK_ERROR_FEATURE_NOT_PRESENT",
          vk.VkErrorExtensionNotPresent: "VK_ERROR_EXTENSION_NOT_PRESENT",
          vk.VkErrorInitializationFailed: "VK_ERROR_INITIALIZATION_FAILED"}


def main(args: list[str]) -> None:
    app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                                           pApplicationInfo=app), None)
    phys = vk.vkEnumeratePhysicalDevices(instance)[0]
    core = [a for a in args if ":" not in a and "." not in a]
    v12 = [a.split(".", 1)[1] for a in args if a.startswith("v12.")]
    extensions = [a.split(":", 1)[1] for a in args if a.startswith("ext:")]
    queues = next((int(a.split(":", 1)[1]) for a in args if a.startswith("queues:")), 1)
    images = {a: image_format(phys, *a.split(":")[1:]) for a in args if a.startswith("image:")}

    q12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
    q2 = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=q12)
    vk.vkGetPhysicalDeviceFeatures2(phys, q2)
    reported = {name: bool(getattr(q2.features, name)) for name in core}
    reported.update({f"v12.{name}": bool(getattr(q12, name)) for name in v12})
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(phys)

    features = vk.VkPhysicalDeviceFeatures(**{name: vk.VK_TRUE for name in core})
    chain = (vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                 **{name: vk.VK_TRUE for name in v12}) if v12 else None)
    queue = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, queueFamilyIndex=0,
                                       queueCount=queues, pQueuePriorities=[1.0] * queues)
    info = vk.VkDeviceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=chain, queueCreateInfoCount=1,
                                 pQueueCreateInfos=[queue], enabledExtensionCount=len(extensions),
                                 ppEnabledExtensionNames=extensions, pEnabledFeatures=features)
    procs = {}
    try:
        device = vk.vkCreateDevice(phys, info, None)
        for a in args:
            if a.startswith("proc:"):
                name = a.split(":", 1)[1]
                procs[name] = vk.lib.vkGetDeviceProcAddr(device, name.encode()) != vk.ffi.NULL
        vk.vkDestroyDevice(device, None)
        result = "VK_SUCCESS"
    except tuple(ERRORS) as e:
        result = ERRORS[type(e)]
    vk.vkDestroyInstance(instance, None)
    print(json.dumps({"result": result, "reported": reported, "queue_counts": [f.queueCount for f in families],
                      "images": images, "procs": procs}))


def image_format(phys, fmt: str, usage: str) -> list[str]:
    """The results of both image-format queries for a 2D optimal-tiling image of `fmt` and `usage`."""
    f, u = getattr(vk, f"VK_FORMAT_{fmt}"), getattr(vk, f"VK_IMAGE_USAGE_{usage}_BIT")
    out = []
    try:
        vk.vkGetPhysicalDeviceImageFormatProperties(phys, f, vk.VK_IMAGE_TYPE_2D, vk.VK_IMAGE_TILING_OPTIMAL, u, 0)
        out.append("VK_SUCCESS")
    except vk.VkErrorFormatNotSupported:
        out.append("VK_ERROR_FORMAT_NOT_SUPPORTED")
    info = vk.VkPhysicalDeviceImageFormatInfo2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_IMAGE_FORMAT_INFO_2, format=f,
                                               type=vk.VK_IMAGE_TYPE_2D, tiling=vk.VK_IMAGE_TILING_OPTIMAL, usage=u)
    try:
        vk.vkGetPhysicalDeviceImageFormatProperties2(phys, info)
        out.append("VK_SUCCESS")
    except vk.VkErrorFormatNotSupported:
        out.append("VK_ERROR_FORMAT_NOT_SUPPORTED")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
