"""`tessera doctor`: what is installed, what is missing, and the fix for each."""
from __future__ import annotations

import ctypes.util
import importlib.util
import shutil
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass

import click

APT_FIX = "make setup (installs it with apt-get), or: sudo apt-get install {pkg}"


@dataclass(frozen=True)
class Check:
    name: str
    probe: Callable[[], str | None]   # detail when present, None when missing
    fix: str


def _python_shared() -> str | None:
    return sysconfig.get_config_var("INSTSONAME") if sysconfig.get_config_var("Py_ENABLE_SHARED") else None


def _tool(name: str) -> Callable[[], str | None]:
    return lambda: shutil.which(name)


def _module(name: str) -> Callable[[], str | None]:
    return lambda: (spec := importlib.util.find_spec(name)) and spec.origin


def _lavapipe() -> str | None:
    from tessera.icd.backend import BackendError, default_manifest

    try:
        return str(default_manifest())
    except BackendError:
        return None


def _shims() -> str | None:
    from .launch import ICD_MANIFEST, LAYER_MANIFEST

    return f"{ICD_MANIFEST.parent.parent}" if ICD_MANIFEST.exists() and LAYER_MANIFEST.exists() else None


CHECKS = [
    Check("Python with shared libpython", _python_shared,
          f"{sys.executable} lacks --enable-shared; use a Python built with it (e.g. pyenv's) for the venv"),
    Check("Vulkan loader (libvulkan1)", lambda: ctypes.util.find_library("vulkan"), APT_FIX.format(pkg="libvulkan1")),
    Check("lavapipe backend driver", _lavapipe, APT_FIX.format(pkg="mesa-vulkan-drivers")),
    Check("vulkaninfo", _tool("vulkaninfo"), APT_FIX.format(pkg="vulkan-tools")),
    Check("vkcube", _tool("vkcube"), APT_FIX.format(pkg="vulkan-tools")),
    Check("glslangValidator", _tool("glslangValidator"), APT_FIX.format(pkg="glslang-tools")),
    Check("Xvfb", _tool("Xvfb"), APT_FIX.format(pkg="xvfb")),
    Check("gcc", _tool("gcc"), APT_FIX.format(pkg="gcc")),
    Check("cffi", _module("cffi"), "make setup (pip install -e .)"),
    Check("vulkan (Python bindings)", _module("vulkan"), "make setup (pip install -e .)"),
    Check("vulkan-object (registry)", _module("vulkan_object"), "make setup (pip install -e .)"),
    Check("shims and manifests", _shims, "make setup (or: python -m tessera.tools.build_shims)"),
]


@click.command()
def doctor() -> None:
    """Check the machine; exit 1 if anything is missing."""
    missing = 0
    for check in CHECKS:
        try:
            detail = check.probe()
        except Exception as e:  # a broken probe is reported, not raised
            detail, check = None, Check(check.name, check.probe, f"{check.fix} ({e})")
        if detail:
            click.echo(f"  ok       {check.name}: {detail}")
        else:
            missing += 1
            click.echo(f"  MISSING  {check.name}. Fix: {check.fix}")
    if missing:
        raise SystemExit(1)
    click.echo("everything Tessera needs is here")
