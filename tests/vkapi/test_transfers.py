"""The shared transfer table covers exactly the transfer commands both rooms intercept."""
from tessera.vkapi import registry
from tessera.vkapi.commands import BUFFER_TRANSFERS, IMAGE_TRANSFERS
from tessera.vkapi.transfers import TRANSFERS


def test_table_covers_every_transfer_command_with_its_arguments():
    assert set(TRANSFERS) == set(BUFFER_TRANSFERS) | set(IMAGE_TRANSFERS)
    vk = registry.load()
    for name, describe in TRANSFERS.items():
        params = vk.commands[name].params[1:]   # after the command buffer, plus the resources
        assert describe.__code__.co_argcount == len(params) + 1, name


def test_the_2_variants_are_recorded_as_info_structs_from_the_registry():
    """Each *2 transfer's one parameter is an I code naming its struct and region array (recorder.py);
    structs with several arrays, strings or pointer-bearing elements are not info structs."""
    from tessera.vkapi.recorder import Recorded, formats, info_array
    from tessera.vkapi.transfers import RECORDED_IN_C

    twos = sorted(name for name in TRANSFERS if name.endswith("2"))
    assert len(twos) == 6 and all(name in RECORDED_IN_C for name in twos)
    vk = registry.load()
    for name in twos:
        (param,) = vk.commands[name].params[1:]
        assert formats(name, Recorded(tagged=True)) == ["T", f"I{param.type}.pRegions"], name
        assert info_array(param.type).length == "regionCount"
    assert info_array("VkDependencyInfo") is None            # three arrays
    assert info_array("VkDebugUtilsLabelEXT") is None        # a string, no array
    assert info_array("VkRenderingInfo") is None             # three attachment pointers
    assert info_array("VkDescriptorSetLayoutCreateInfo") is None   # its bindings hold a pointer (pImmutableSamplers)
    assert info_array("VkBufferCopy") is None                # no sType
