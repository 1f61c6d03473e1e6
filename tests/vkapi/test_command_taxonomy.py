"""Every workload command of the registry is either intercepted by both shims or hidden
(issue #16 item 6: draws that escaped the taxonomy left render passes at '0 draws')."""
from __future__ import annotations

import re

from tessera.icd.shim_spec import HOOKS as DRIVER_HOOKS
from tessera.layer.shim_spec import HOOKS as LAYER_HOOKS
from tessera.vkapi import registry
from tessera.vkapi.commands import (ACCELERATION_STRUCTURES, DISPATCHES, DRAWS, TRACE_RAYS,
                                    UNTRACKED_WORKLOAD_EXTENSIONS)

# Acceleration-structure builds and copies are workloads too; vkCmdWriteAccelerationStructuresProperties* is a query.
WORKLOAD = re.compile(r"^vkCmd(Draw|Dispatch|TraceRays|Build\w*AccelerationStructure|Copy\w*AccelerationStructure)")
TRACKED = DRAWS + DISPATCHES + TRACE_RAYS + ACCELERATION_STRUCTURES


def _workload_commands() -> dict[str, list[str]]:
    vk = registry.load()
    return {name: cmd.extensions for name, cmd in vk.commands.items()
            if WORKLOAD.match(name) and not cmd.alias}


def test_every_registry_workload_command_is_tracked_or_its_extension_hidden():
    tracked = set(TRACKED)
    unknown = {name: exts for name, exts in _workload_commands().items()
               if name not in tracked and not (exts and all(e in UNTRACKED_WORKLOAD_EXTENSIONS for e in exts))}
    assert not unknown, f"workload commands neither intercepted nor hidden: {unknown}"


def test_tracked_workloads_are_hooked_by_layer_and_driver():
    for name in TRACKED:
        assert name in LAYER_HOOKS and name in DRIVER_HOOKS, name


def test_hidden_extensions_really_exist_and_hold_untracked_work():
    vk = registry.load()
    holders = {e for exts in _workload_commands().values() for e in exts}
    for ext in UNTRACKED_WORKLOAD_EXTENSIONS:
        assert ext in vk.extensions, ext
        assert ext in holders, f"{ext} has no workload command: nothing to hide"


def test_acceleration_structure_commands_are_matched_by_the_workload_pattern():
    """The pattern itself sees every KHR build and copy (so the first test covers them)."""
    commands = _workload_commands()
    for name in ACCELERATION_STRUCTURES:
        assert name in commands, name
    assert "vkCmdWriteAccelerationStructuresPropertiesKHR" not in commands
