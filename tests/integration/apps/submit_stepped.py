"""submit_loop.py in lockstep with its caller: one iteration per line on stdin.

Run: .venv/bin/python tests/integration/apps/submit_stepped.py
Each iteration submits one small transfer (a fill of the buffer with N),
checks it, prints 'iteration N' and reads a line: 'next' runs another,
anything else (or end of input) closes the device and exits. The caller
decides when things happen (kill the daemon, restart it, kill the app) from
what it has seen, so no test has to guess how fast anything runs.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    ctx = vkapp.Context(vkapp.Settings.from_env(), "submit_stepped")
    buf = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    i = 0
    while True:
        i += 1
        cmd = ctx.command_buffer()
        vk.vkCmdFillBuffer(cmd, buf.handle, 0, 256, i)
        vkapp.host_barrier(cmd)
        ctx.submit([cmd])
        if not (buf.array(np.uint32) == i).all():
            raise SystemExit(f"iteration {i}: wrong buffer contents")
        print(f"iteration {i}", flush=True)
        if sys.stdin.readline().strip() != "next":
            break
    ctx.close()


if __name__ == "__main__":
    main()
