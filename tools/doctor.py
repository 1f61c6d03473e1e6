"""`tessera doctor`: what is installed, what is missing, and the fix for each.

It also reports the backend driver the emulated Mali executes on, queried for
real through the Khronos loader (a child process of this interpreter running
`probe_main()` with the `vulkan` package, VK_DRIVER_FILES naming the backend
manifest): its driver name and info (the Mesa version), apiVersion and device
extension count; what the emulated device loses on it compared with a current
backend (`CAPABILITIES`); and what the emulated Mali reports over it (the same
probe through Tessera's driver, layer off).

`tessera doctor --gpu NAME` (or `--gpu-profile FILE`) reports the emulated GPU instead: the shipped
real devices (icd/devices/), where each of NAME's timing figures comes from (icd/profiles.py), and
every capability its emulated device reports other than the real device, with the reason
(icd/device_report.py: the backend's capabilities from vulkaninfo, the driver's own clamping rules).
"""
from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


def _backend_manifest() -> str | None:
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
    Check("backend driver manifest (lavapipe)", _backend_manifest, APT_FIX.format(pkg="mesa-vulkan-drivers")),
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


# What a current backend gives the emulated Mali and an older one (Mesa 22.3 lavapipe) does not:
# (what, Vulkan version that has it in core or None, device extensions that give it).
CAPABILITIES = (
    ("Vulkan 1.4", (1, 4), ()),
    ("ray tracing (VK_KHR_ray_tracing_pipeline, VK_KHR_ray_query, VK_KHR_acceleration_structure)", None,
     ("VK_KHR_ray_tracing_pipeline", "VK_KHR_ray_query", "VK_KHR_acceleration_structure")),
    ("shader objects (VK_EXT_shader_object)", None, ("VK_EXT_shader_object",)),
    ("maintenance5 (VK_KHR_maintenance5: VkPipelineCreateFlags2CreateInfoKHR)", (1, 4), ("VK_KHR_maintenance5",)),
    ("descriptor buffers (VK_EXT_descriptor_buffer)", None, ("VK_EXT_descriptor_buffer",)),
)
PROBE_TIMEOUT = 60.0


def probe_main() -> None:
    """Child process: print, as JSON, what the first physical device the loader finds reports."""
    import vulkan as vk

    def text(chars) -> str:
        return chars if isinstance(chars, str) else vk.ffi.string(chars).decode()

    app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                                           pApplicationInfo=app), None)
    phys = vk.vkEnumeratePhysicalDevices(instance)[0]
    driver = vk.VkPhysicalDeviceDriverProperties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES)
    props2 = vk.VkPhysicalDeviceProperties2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=driver)
    vk.vkGetPhysicalDeviceProperties2(phys, props2)
    props = props2.properties
    extensions = sorted(text(e.extensionName) for e in vk.vkEnumerateDeviceExtensionProperties(phys, None))
    vk.vkDestroyInstance(instance, None)
    print(json.dumps({"deviceName": text(props.deviceName), "apiVersion": props.apiVersion,
                      "driverVersion": props.driverVersion, "vendorID": props.vendorID,
                      "driverName": text(driver.driverName), "driverInfo": text(driver.driverInfo),
                      "extensions": extensions}))


def _version(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def probe(env: dict[str, str]) -> dict:
    """What the loader's first device reports in `env` (raises RuntimeError with the child's error)."""
    done = subprocess.run([sys.executable, "-c", "from tessera.tools.doctor import probe_main; probe_main()"],
                          env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError((done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])
    return json.loads(lines[-1])


def backend_env(manifest: Path) -> dict[str, str]:
    """The loader sees the backend driver alone, without Tessera's driver or layer."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES", "VK_LOADER_DRIVERS_SELECT", "VK_INSTANCE_LAYERS")}
    return dict(env, VK_DRIVER_FILES=str(manifest))


def losses(info: dict) -> list[str]:
    """What the emulated device cannot offer on this backend (CAPABILITIES it lacks)."""
    api = tuple(int(x) for x in _version(info["apiVersion"]).split(".")[:2])
    have = set(info["extensions"])
    return [what for what, core, exts in CAPABILITIES
            if not ((core is not None and api >= core) or (exts and all(e in have for e in exts)))]


def _describe(info: dict) -> str:
    return (f"{info['driverName']} {info['driverInfo']} ({info['deviceName']}): "
            f"Vulkan {_version(info['apiVersion'])}, {len(info['extensions'])} device extensions")


def report_backend(manifest: Path) -> bool:
    """Print the backend and the emulated device over it; False if the backend does not answer."""
    from tessera.icd.backend import private_manifest

    origin = "private copy from bookworm-backports, made by make setup" if manifest == private_manifest() else "system"
    click.echo(f"backend: {manifest} ({origin})")
    try:
        info = probe(backend_env(manifest))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        click.echo(f"  MISSING  backend driver answers through the loader ({e}). Fix: make setup")
        return False
    click.echo(f"  ok       backend driver: {_describe(info)}")
    lost = losses(info)
    for what in lost:
        click.echo(f"  older    the emulated Mali has no {what} on this backend")
    if lost and "Mesa" in info["driverInfo"]:
        click.echo("           (Mesa 25 lavapipe has all of these: on Debian 12 `make setup` fetches it; "
                   "see docs/backends.md)")
    from .launch import ICD_MANIFEST, LaunchConfig, environment

    if ICD_MANIFEST.exists():
        with tempfile.TemporaryDirectory(prefix="tessera-doctor-") as tmp:
            env = environment(LaunchConfig(Path(tmp), backend_manifest=manifest, layer=False))
            try:
                mali = probe(env)
                click.echo(f"  ok       emulated device: {mali['deviceName']}, Vulkan {_version(mali['apiVersion'])}, "
                           f"{len(mali['extensions'])} device extensions, driverVersion "
                           f"{_version(mali['driverVersion'])}; driverInfo: {mali['driverInfo']}")
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                click.echo(f"  MISSING  emulated device over this backend ({e}). Fix: make setup")
                return False
    return True


def _python_version(python: str) -> str | None:
    try:
        done = subprocess.run([python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def report_python_environment(env: dict[str, str] | None = None) -> list[str]:
    """What the user's Python environment (another venv or conda active, PYTHONHOME, PYTHONPATH)
    means for programs under `tessera run`: one line each (issue #31)."""
    env = os.environ if env is None else env
    ours = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lines = []
    active = [f"{name}={env[name]}" for name in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(name)]
    first = shutil.which("python3", path=env.get("PATH", os.defpath))
    version = _python_version(first) if first else None
    if first and Path(first).resolve() != Path(sys.executable).resolve():
        active.append(f"python3 on PATH is {first} (Python {version or 'unknown'})")
    for name in ("PYTHONHOME", "PYTHONPATH"):
        if env.get(name):
            active.append(f"{name}={env[name]}")
    if not active:
        return [f"  ok       Python environment: the project's ({sys.executable}, Python {ours})"]
    lines.append(f"  note     another Python environment is active: {'; '.join(active)}")
    lines.append(f"           C/C++/Rust programs: unaffected (the shims start the project's Python {ours} "
                 f"from {sys.executable}, isolated from PATH, PYTHONHOME and PYTHONPATH)")
    if version and version != ours:
        lines.append(f"           Python programs: `python3` here is Python {version}: the shims refuse it; run "
                     f"them with a Python {ours} (for example {sys.executable})")
    else:
        lines.append(f"           Python programs: served by the interpreter that runs them (any Python {ours}); "
                     f"Tessera's dependencies come from the project first")
    return lines


def _c_program_sees_the_mali() -> bool:
    """A C program (vulkaninfo) under Tessera's driver in this very environment finds the Mali."""
    from .launch import ICD_MANIFEST, LaunchConfig, environment

    if not ICD_MANIFEST.exists() or not shutil.which("vulkaninfo"):
        return True   # reported by the checks above
    with tempfile.TemporaryDirectory(prefix="tessera-doctor-") as tmp:
        env = environment(LaunchConfig(Path(tmp), layer=False))
        try:
            done = subprocess.run(["vulkaninfo", "--summary"], env=env, capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            click.echo(f"  MISSING  a C program finds the emulated Mali ({e}). Fix: make setup")
            return False
    if "(emulated)" in done.stdout:
        click.echo("  ok       a C program (vulkaninfo) finds the emulated Mali in this environment")
        return True
    why = next((line for line in done.stderr.splitlines() if line.startswith("tessera:")), done.stderr.strip()[-200:])
    click.echo(f"  MISSING  a C program (vulkaninfo) finds the emulated Mali in this environment: {why}. "
               "Fix: make setup")
    return False


def report_gpus(default: str) -> None:
    """The GPUs `tessera run --gpu` offers: the real devices first, then the timing-only ones."""
    from tessera.icd.profiles import PROFILES, shipped

    click.echo("GPUs (tessera run --gpu NAME; icd/devices/README.md says where each profile comes from):")
    for key in shipped() + sorted(k for k in PROFILES if k not in shipped()):
        gpu = PROFILES[key]
        what = f"{gpu.profile_label} ({gpu.profile_name})" if gpu.profile_name else \
            "timing only: no real device's profile, reports its backend's capabilities"
        click.echo(f"  {key:<10} {gpu.device_name}: {what}{'  [default]' if key == default else ''}")


def report_gpu(key: str, profile_file: Path | None, manifest: Path | None) -> bool:
    """The GPU `key` (with a user's profile when given): its timing figures and their sources, and
    every difference between its profile and what its emulated device reports over the backend
    `manifest`, with the reason. False when the backend's capabilities cannot be read."""
    from tessera.icd import device_report
    from tessera.icd.profiles import PROFILES, with_profile_file
    from tessera.layer.shim_spec import LAYER_DEVICE_EXTENSIONS

    gpu = PROFILES[key] if profile_file is None else with_profile_file(PROFILES[key], profile_file)
    click.echo(f"GPU {key}: {gpu.description}")
    click.echo(f"  timing   {gpu.shader_cores} cores x {gpu.warps_per_core} warps x {gpu.warp_width} threads; "
               f"per core per clock: {gpu.fma_rate} FMA, {gpu.texel_rate} texels, {gpu.pixel_rate} pixels; "
               f"{gpu.clock_mhz} MHz")
    click.echo(f"  sources  {gpu.sources}")
    path = gpu.vulkan_profile()
    if path is None:
        click.echo("  profile  none: the emulated device reports its backend's capabilities")
        return True
    try:
        backend = device_report.backend_profile(manifest)
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
        click.echo(f"  MISSING  the backend's capabilities ({e}). Fix: make setup")
        return False
    found = device_report.gpu_differences(path, backend, LAYER_DEVICE_EXTENSIONS)
    click.echo(f"  profile  {path}")
    click.echo(f"  {len(found)} difference(s) between the profile and what the emulated device reports over "
               f"{backend.label or backend.name} (profile value -> reported, reason):")
    for line in device_report.lines(found):
        click.echo(f"    {line}")
    return True


@click.command()
@click.option("--backend", "backend", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Backend driver manifest to report on (default: the one `tessera run` uses).")
@click.option("--gpu", default=None, metavar="NAME",
              help="Report the emulated GPU NAME instead of the machine: the GPUs offered, NAME's timing "
                   "figures and their sources, and each capability it reports other than the real device, "
                   "with the reason.")
@click.option("--gpu-profile", "gpu_profile", default=None, metavar="FILE.json",
              help="With --gpu (default: the default GPU): report this Vulkan Profiles file as `tessera run "
                   "--gpu-profile` would use it.")
def doctor(backend: Path | None, gpu: str | None, gpu_profile: str | None) -> None:
    """Check the machine and the backend driver; exit 1 if anything is missing. With --gpu or
    --gpu-profile: report the emulated GPU instead."""
    if gpu is not None or gpu_profile is not None:
        from tessera.icd.profiles import DEFAULT_PROFILE
        from tessera.tools.cmd_run import check_gpu, check_gpu_profile

        key = check_gpu(gpu) or DEFAULT_PROFILE
        profile_file = check_gpu_profile(gpu_profile)
        report_gpus(DEFAULT_PROFILE)
        manifest = backend or (Path(m) if (m := _backend_manifest()) else None)
        if not report_gpu(key, profile_file, manifest.resolve() if manifest else None):
            raise SystemExit(1)
        return
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
    for line in report_python_environment():
        click.echo(line)
    if not _c_program_sees_the_mali():
        missing += 1
    manifest = backend or (Path(m) if (m := _backend_manifest()) else None)
    if manifest is not None and _module("vulkan")() and not report_backend(manifest.resolve()):
        missing += 1
    if missing:
        raise SystemExit(1)
    click.echo("everything Tessera needs is here")
