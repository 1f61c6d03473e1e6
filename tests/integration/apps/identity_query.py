"""Prints, as JSON, what the device reports through vkGetPhysicalDeviceProperties2
(with a pNext chain mixing structs the backend fills and structs the emulated
driver fills), vkGetPhysicalDeviceFeatures2, and whether a device can be created
with the emulated extensions and their feature struct enabled.

Run: .venv/bin/python tests/integration/apps/identity_query.py  (under `tessera run` or not)
"""
import json

import vulkan as vk


def text(chars) -> str:
    return chars if isinstance(chars, str) else vk.ffi.string(chars).decode()


def main() -> None:
    app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                                           pApplicationInfo=app), None)
    devices = vk.vkEnumeratePhysicalDevices(instance)
    phys = devices[0]
    builtins = vk.VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM)
    ids = vk.VkPhysicalDeviceIDProperties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, pNext=builtins)
    core = vk.VkPhysicalDeviceShaderCorePropertiesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_ARM, pNext=ids)
    v12 = vk.VkPhysicalDeviceVulkan12Properties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES,
                                                pNext=core)
    driver = vk.VkPhysicalDeviceDriverProperties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                                                 pNext=v12)
    props2 = vk.VkPhysicalDeviceProperties2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=driver)
    vk.vkGetPhysicalDeviceProperties2(phys, props2)
    props = vk.vkGetPhysicalDeviceProperties(phys)

    builtin_features = vk.VkPhysicalDeviceShaderCoreBuiltinsFeaturesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_FEATURES_ARM, shaderCoreBuiltins=7)
    features2 = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                             pNext=builtin_features)
    vk.vkGetPhysicalDeviceFeatures2(phys, features2)

    extensions = sorted(text(e.extensionName) for e in vk.vkEnumerateDeviceExtensionProperties(phys, None))
    wanted = [e for e in ("VK_ARM_shader_core_builtins", "VK_ARM_shader_core_properties", "VK_EXT_debug_marker")
              if e in extensions]
    prio = vk.ffi.new("float[1]", [1.0])
    queue = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                       queueFamilyIndex=0, queueCount=1, pQueuePriorities=prio)
    enable = vk.VkPhysicalDeviceShaderCoreBuiltinsFeaturesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_FEATURES_ARM, shaderCoreBuiltins=0)
    info = vk.VkDeviceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                 pNext=enable if wanted else None, queueCreateInfoCount=1,
                                 pQueueCreateInfos=[queue], enabledExtensionCount=len(wanted),
                                 ppEnabledExtensionNames=wanted)
    try:
        device = vk.vkCreateDevice(phys, info, None)
        created = True
        vk.vkDestroyDevice(device, None)
    except vk.VkError as e:
        created = type(e).__name__
    vk.vkDestroyInstance(instance, None)
    print(json.dumps({
        "device_count": len(devices),
        "vendorID": props.vendorID, "deviceID": props.deviceID, "deviceType": props.deviceType,
        "deviceName": text(props.deviceName), "apiVersion": props.apiVersion,
        "props2_deviceName": text(props2.properties.deviceName), "props2_vendorID": props2.properties.vendorID,
        "limits_maxImageDimension2D": props.limits.maxImageDimension2D,
        "driverID": driver.driverID, "driverName": text(driver.driverName), "driverInfo": text(driver.driverInfo),
        "v12_driverID": v12.driverID, "v12_driverName": text(v12.driverName),
        "conformance": [driver.conformanceVersion.major, driver.conformanceVersion.minor],
        "deviceUUID": bytes(ids.deviceUUID).hex(), "driverUUID": bytes(ids.driverUUID).hex(),
        "pixelRate": core.pixelRate, "texelRate": core.texelRate, "fmaRate": core.fmaRate,
        "shaderCoreMask": builtins.shaderCoreMask, "shaderCoreCount": builtins.shaderCoreCount,
        "shaderWarpsPerCore": builtins.shaderWarpsPerCore,
        "shaderCoreBuiltins_feature": builtin_features.shaderCoreBuiltins,
        "extensions": extensions, "created_with": wanted, "device_created": created,
    }))


if __name__ == "__main__":
    main()
