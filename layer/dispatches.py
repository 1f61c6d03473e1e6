"""Compute dispatch hooks: tag each dispatch with a `t<tagID>` label."""
from __future__ import annotations

from .tagging import Labeller


def register(hooks, labeller: Labeller) -> None:
    @hooks.before("vkCmdDispatch")
    def before_dispatch(device, commandBuffer, x, y, z):
        labeller.begin(device, commandBuffer)

    @hooks.after("vkCmdDispatch")
    def after_dispatch(device, result, commandBuffer, x, y, z):
        labeller.end(device, commandBuffer)
