"""threads.py with more rounds, gated by its caller: for the stalled-daemon test.

Run: .venv/bin/python tests/integration/apps/threads_gated.py ROUNDS
Once the device exists (the layer has connected to hostd and sent its DEVICE
frame) it prints 'ready' and waits for a line on stdin, so the caller can
stop the daemon at a known point without sleeping; it prints 'closing' just
before destroying the device, so the caller can time the exit alone. The
recording and the checks are threads.py's, with ROUNDS rounds per thread.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import threads  # noqa: E402
import vkapp  # noqa: E402

_init, _close = vkapp.Context.__init__, vkapp.Context.close


def _gated_init(self, *args, **kwargs) -> None:
    _init(self, *args, **kwargs)
    print("ready", flush=True)
    sys.stdin.readline()


def _timed_close(self) -> None:
    print("closing", flush=True)
    _close(self)


if __name__ == "__main__":
    threads.ROUNDS = int(sys.argv[1])
    vkapp.Context.__init__ = _gated_init
    vkapp.Context.close = _timed_close
    threads.main()
