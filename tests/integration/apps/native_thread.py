"""A Python program whose native thread calls Vulkan while the program holds (or not) its GIL.

Run: .venv/bin/python tests/integration/apps/native_thread.py LIBRARY held|released

LIBRARY is apps/c/native_thread.c built as a shared library. With `held`, the call goes through
ctypes.PyDLL, which keeps Python's lock for the whole call, as moderngl does while zink's thread
works; with `released`, through ctypes.CDLL, which lets it go. Prints 'native_thread: N objects'.
"""
import ctypes
import sys
from pathlib import Path

import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    library, gil = sys.argv[1], sys.argv[2]
    ctx = vkapp.Context(vkapp.Settings.from_env(), "native_thread")
    lib = (ctypes.PyDLL if gil == "held" else ctypes.CDLL)(library)
    lib.create_on_native_thread.argtypes = [ctypes.c_size_t]
    created = lib.create_on_native_thread(int(vk.ffi.cast("uintptr_t", ctx.device)))
    print(f"native_thread: {created} objects", flush=True)
    ctx.close()


if __name__ == "__main__":
    main()
