"""Submits one small transfer per iteration, printing 'iteration N' after each completes.

Run: .venv/bin/python tests/integration/apps/submit_loop.py [ITERATIONS]
Used to kill an application mid-run: everything it completed must be in the trace.
Each iteration fills a buffer with N and checks it.
"""
import sys
import time
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    ctx = vkapp.Context(vkapp.Settings.from_env(), "submit_loop")
    buf = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    for i in range(1, iterations + 1):
        cmd = ctx.command_buffer()
        vk.vkCmdFillBuffer(cmd, buf.handle, 0, 256, i)
        vkapp.host_barrier(cmd)
        ctx.submit([cmd])
        if not (buf.array(np.uint32) == i).all():
            raise SystemExit(f"iteration {i}: wrong buffer contents")
        print(f"iteration {i}", flush=True)
        time.sleep(0.005)
    ctx.close()


if __name__ == "__main__":
    main()
