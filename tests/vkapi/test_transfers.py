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
