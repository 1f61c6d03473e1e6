"""Submits a known number of transfers, waits for them, says so, then idles until a signal ends it.

Run: .venv/bin/python tests/integration/apps/wait_for_signal.py [SUBMITS] [--ignore-signals | --count-sigint]
Prints 'ready SUBMITS pid PID' once every submit has completed (each a fill of a buffer with N, checked),
then sleeps until it is stopped: by default SIGINT (KeyboardInterrupt) or SIGTERM ends it; with
--ignore-signals it ignores both, so only SIGKILL does; with --count-sigint it prints 'got SIGINT' at
each SIGINT and, at the first, cleans up for a second (counting any further one) and exits with 130. Used to interrupt `tessera run` at a point
the test knows (tests/integration/test_run_interrupt.py): exactly SUBMITS GPU events precede it.
"""
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    submits = int(args[0]) if args else 5
    if "--ignore-signals" in sys.argv:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    interrupted = []
    if "--count-sigint" in sys.argv:
        def count(signum, frame) -> None:
            print("got SIGINT", flush=True)
            interrupted.append(signum)
        signal.signal(signal.SIGINT, count)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "wait_for_signal")
    buf = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    for i in range(1, submits + 1):
        cmd = ctx.command_buffer()
        vk.vkCmdFillBuffer(cmd, buf.handle, 0, 256, i)
        vkapp.host_barrier(cmd)
        ctx.submit([cmd])
        if not (buf.array(np.uint32) == i).all():
            raise SystemExit(f"submit {i}: wrong buffer contents")
    print(f"ready {submits} pid {os.getpid()}", flush=True)
    while not interrupted:
        signal.pause()
    time.sleep(1.0)                 # a program's cleanup, which a second SIGINT would interrupt
    sys.exit(130)


if __name__ == "__main__":
    main()
