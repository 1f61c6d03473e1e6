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
    """Each *2 transfer's one parameter is an I code naming its struct and region array (recorder_gen.py);
    a render pass's structs name their arrays and single attachments; structs with strings or
    pointer-bearing elements are not info structs."""
    from tessera.vkapi.recorder import Recorded
    from tessera.vkapi.recorder_gen import formats, info_pointers
    from tessera.vkapi.transfers import RECORDED_IN_C

    twos = sorted(name for name in TRANSFERS if name.endswith("2"))
    assert len(twos) == 6 and all(name in RECORDED_IN_C for name in twos)
    vk = registry.load()
    for name in twos:
        (param,) = vk.commands[name].params[1:]
        assert formats(name, Recorded(tagged=True)) == ["T", f"I{param.type}.pRegions:regionCount"], name
        assert [(m.name, m.length) for m in info_pointers(param.type)] == [("pRegions", "regionCount")]
    assert formats("vkCmdBeginRendering", Recorded(tagged=True)) == [
        "T", "IVkRenderingInfo.pColorAttachments:colorAttachmentCount.pDepthAttachment.pStencilAttachment"]
    assert formats("vkCmdBeginRenderPass2", Recorded()) == [
        "R", "IVkRenderPassBeginInfo.pClearValues:clearValueCount", "IVkSubpassBeginInfo"]
    assert info_pointers("VkDebugUtilsLabelEXT") is None        # a string
    assert info_pointers("VkDescriptorSetLayoutCreateInfo") is None   # its bindings hold a pointer (pImmutableSamplers)
    assert info_pointers("VkBufferCopy") is None                # no sType
