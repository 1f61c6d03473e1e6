"""Run an example as an application that never enables VK_EXT_debug_utils (issue #23).

Run: .venv/bin/python tests/integration/apps/without_debug_utils.py EXAMPLE [LAYER]  (e.g. compute_collatz;
under `tessera run` or not). The example's instance-extension query is filtered so VK_EXT_debug_utils
is not in what it sees, so it creates its instance without it (and without a messenger), as many
programs do (IREE, Kompute, vkcube without --validate). With LAYER, the program enables that layer in
its own VkInstanceCreateInfo (as Kompute enables the validation layer). Prints what the example
prints, then 'without_debug_utils: OK' and exits 0 when the example did.
"""
import runpy
import sys
from pathlib import Path

import vulkan as vk

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
HIDDEN = "VK_EXT_debug_utils"


def _name(props) -> str:
    value = props.extensionName
    return value if isinstance(value, str) else vk.ffi.string(value).decode()


def main() -> None:
    example, layers = sys.argv[1], sys.argv[2:]
    listed = vk.vkEnumerateInstanceExtensionProperties
    vk.vkEnumerateInstanceExtensionProperties = lambda layer: [p for p in listed(layer) if _name(p) != HIDDEN]
    if layers:
        info = vk.VkInstanceCreateInfo
        vk.VkInstanceCreateInfo = lambda **kw: info(**kw, enabledLayerCount=len(layers), ppEnabledLayerNames=layers)
    sys.path.insert(0, str(EXAMPLES))
    sys.argv = [str(EXAMPLES / f"{example}.py")]
    runpy.run_path(sys.argv[0], run_name="__main__")
    print("without_debug_utils: OK")


if __name__ == "__main__":
    main()
