"""CPU cost per vkCmdDraw/Dispatch/CopyBuffer(2) and vkQueueSubmit: lavapipe vs emulated driver vs driver + layer.

What it measures, in one run, on one machine: build/bench/record_cost (bench/record_cost.c)
in each mode, in three loader environments (bench/common.py): plain lavapipe, the emulated
Mali driver alone ("ICD only"), and the driver with the Tessera layer (everything tracked,
spooling to a temporary session folder). Inputs:
  draw      N x vkCmdDraw(3,1,0,0) recorded in one dynamic-rendering instance (64x64 RGBA8,
            trivial vertex + constant-color fragment shader);
  pass      N dynamic-rendering instances of one vkCmdDraw each (the same image and pipeline);
  dispatch  N x vkCmdDispatch(1,1,1) recorded with an empty compute pipeline bound;
  copy      N x vkCmdCopyBuffer of one 16-byte region between two 4096-byte buffers;
  copy2     the same copies through vkCmdCopyBuffer2 (VkCopyBufferInfo2, one VkBufferCopy2);
  buffer    S x one command buffer recorded over (vkBeginCommandBuffer, vkCmdBindPipeline, vkCmdDispatch,
            vkEndCommandBuffer): the per-command-buffer cost, the layer's worker included when it lags;
  submit    S x vkQueueSubmit of one pre-recorded 16-byte vkCmdFillBuffer command buffer
            (fence waits every 64 submits are not timed);
  groups    S x vkEnumeratePhysicalDeviceGroups (the count, then the groups): a query the driver answers;
  frame     F frames of a loop that re-records its work (begin, bind, 8 x vkCmdDispatch, end), submits it
            with a fence and waits: wall time per frame, and the process's CPU time per frame on all threads
            (the backend's, the driver's and the layer's workers included);
  passframe F render-pass-heavy frames: a "frame" label around 8 labelled dynamic-rendering passes of 4 draws
            and 2 dispatches, submitted with a fence and waited for: wall and process CPU per frame;
  subframe  F frames as `passframe`, each pass a render pass object of two subpasses (two draws in each);
  pushframe F frames as `frame`, each dispatch after a vkCmdPushDescriptorSetKHR of one storage buffer;
  tlframe   F frames as `frame`, paced by a timeline semaphore instead of a fence: each submit waits for the
            value the previous one signalled and signals the next, which the host waits for (vkWaitSemaphores);
  bufframe  F frames of 40 command buffers, as engines record a frame in several: the pool reset, each buffer
            re-recorded (begin, bind, 2 x vkCmdDispatch, end), all in one vkQueueSubmit with a fence, waited for;
  batchframe F frames of 4 command buffers (dispatches and fills in turn), each a batch of the one vkQueueSubmit
            waiting for a binary semaphore the batch before signals;
  secframe  F frames of 4 secondary command buffers (bind, 2 x vkCmdDispatch) re-recorded and executed by one
            primary, recorded again too, submitted with a fence and waited for;
  preframe  F frames as secframe, but the 4 secondaries are recorded once, before the frames (a pool of their own);
  threads   S re-recordings (reset pool, begin, bind, 8 x vkCmdDispatch, end) by one thread, then by two
            threads at once (S each, own pools): wall and process CPU per recorded command buffer, and how
            much more two threads record per second than one.
After the last draw/dispatch/copy recording, the buffer of N commands is submitted once and the queue
waited for idle (one sample, not part of the per-call numbers): printed as the submit's time and the
wait's (the backend running N commands, and the driver's GPU events of them reaching the trace).
Each number is ns per call, best of R repetitions inside one process. Printed: ns/call, the ratio
to lavapipe, the layer-vs-ICD-only ratio and the layer's own added ns per call (ICD + layer minus
ICD only). A benchmark, not a test: it never fails on a number.

Run: .venv/bin/python bench/bench_layer.py [--calls N] [--submits S] [--reps R]
         [--frames F]
         [--modes draw,pass,dispatch,copy,copy2,buffer,submit,groups,frame,passframe,subframe,pushframe,tlframe,
                  bufframe,batchframe,secframe,preframe,threads]
         [--rounds K] [--cpu C]
`--rounds K` runs the three environments in turn K times and prints each one's median run; `--cpu C` pins every
run to CPU C. Both together measure a frame loop's few-microsecond differences on a small VM (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from common import BUILD_BENCH, ICD_ENV, LAVAPIPE_ENV, LAYER_ENV, bench_environments, build, run_json

MODES = ("draw", "pass", "dispatch", "copy", "copy2", "buffer", "submit", "groups", "frame", "passframe", "subframe",
         "pushframe", "tlframe",
         "bufframe", "batchframe", "secframe", "preframe", "threads")
WHAT = {"draw": "vkCmdDraw", "pass": "render pass (vkCmdBeginRendering + vkCmdDraw + vkCmdEndRendering)",
        "dispatch": "vkCmdDispatch", "copy": "vkCmdCopyBuffer", "copy2": "vkCmdCopyBuffer2",
        "buffer": "command buffer recorded (begin, bind, dispatch, end)", "submit": "vkQueueSubmit",
        "groups": "vkEnumeratePhysicalDeviceGroups",
        "frame": "frame (record 8 dispatches, submit, wait)",
        "passframe": "frame (8 labelled passes of 4 draws, 2 dispatches, submit, wait)",
        "subframe": "frame (8 labelled render passes of 2 subpasses of 2 draws, 2 dispatches, submit, wait)",
        "pushframe": "frame (record 8 dispatches, each after a push descriptor, submit, wait)",
        "tlframe": "frame paced by a timeline semaphore (record 8 dispatches, submit, vkWaitSemaphores)",
        "bufframe": "frame of 40 command buffers (reset pool, record each: bind, 2 dispatches; submit, wait)",
        "batchframe": "frame of 4 batches in one submit, each waiting for the one before (dispatches, fills)",
        "secframe": "frame of 4 secondary command buffers (bind, 2 dispatches) executed by one primary, submitted",
        "preframe": "frame of one primary executing 4 secondaries recorded once (bind, 2 dispatches), submitted",
        "threads": "command buffer re-recorded (reset pool, begin, bind, 8 dispatches, end)"}
FRAMES = ("frame", "passframe", "subframe", "pushframe", "tlframe", "bufframe", "batchframe", "secframe", "preframe")
# A mode that is record_cost's with arguments of its own: (record_cost's mode, the arguments after N and REPS)
ARGUMENTS = {"subframe": ("passframe", ["subpasses"]), "pushframe": ("frame", [8, "pushed"]),
             "tlframe": ("frame", [8, "dispatch", "timeline"]), "bufframe": ("buffers", [40]),
             "batchframe": ("buffers", [4, "linked"]), "secframe": ("buffers", [4, "secondaries"]),
             "preframe": ("buffers", [4, "prerecorded"])}
RECORDING = ("draw", "pass", "dispatch", "copy", "copy2")


def record_costs(envs: dict[str, dict[str, str]], mode: str, calls: int, reps: int, threads: int = 1,
                 rounds: int = 1, cpu: int | None = None) -> dict[str, dict]:
    """record_cost's JSON for `mode` in each environment (best of `reps` repetitions of `calls` calls):
    ns_per_call, end_ns_per_call (the vkEndCommandBuffer that follows, per call), cpu_ns_per_call,
    submit_ns, wait_ns. With `rounds`, the environments run in turn that many times (drift on the machine falls
    on all of them) and each one's run of median cost is kept (process CPU for the frame modes); `cpu` pins
    every run to that CPU (compare_checkouts.py says why)."""
    mode_of_run, extra = ARGUMENTS.get(mode, (mode, [threads] if mode == "threads" else []))
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    runs: dict[str, list[dict]] = {name: [] for name in envs}
    for _ in range(rounds):
        for name, env in envs.items():
            runs[name].append(run_json([*pin, BUILD_BENCH / "record_cost", mode_of_run, calls, reps, *extra], env))
            empty_session(env)
    key = "cpu_ns_per_call" if mode in FRAMES else "ns_per_call"
    return {name: sorted(rs, key=lambda r: r[key])[len(rs) // 2] for name, rs in runs.items()}


def empty_session(env: dict[str, str]) -> None:
    """Remove what a run wrote to its session folder (a frame loop writes a hundred MB or more): left there, later
    runs in the folder measured up to 30 µs a frame slower (docs/benchmarks.md, Session 15)."""
    folder = env.get("TESSERA_SESSION_DIR")
    for path in Path(folder).iterdir() if folder else ():
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)


def print_threads(calls: int, reps: int, one: dict[str, dict], two: dict[str, dict]) -> None:
    print(f"{WHAT['threads']} ({calls} per thread, best of {reps}):")
    for name in one:
        a, b = one[name], two[name]
        print(f"  {name:18s} 1 thread {a['ns_per_call'] / 1e3:8.2f} us wall {a['cpu_ns_per_call'] / 1e3:8.2f} us CPU"
              f"   2 threads {b['ns_per_call'] / 1e3:8.2f} us wall {b['cpu_ns_per_call'] / 1e3:8.2f} us CPU"
              f"   2 threads record x{a['ns_per_call'] / b['ns_per_call']:.2f} as fast")


def print_costs(mode: str, calls: int, reps: int, runs: dict[str, dict]) -> None:
    ns = {name: (r["ns_per_call"], r.get("end_ns_per_call", 0.0)) for name, r in runs.items()}
    base = ns[LAVAPIPE_ENV][0]
    print(f"{WHAT[mode]} ({calls} calls, best of {reps}):")
    for name, (value, end) in ns.items():
        total = f"   + {end:8.1f} ns/call at vkEndCommandBuffer = {value + end:8.1f}" if mode in RECORDING else ""
        print(f"  {name:18s} {value:10.1f} ns/call   x{value / base:7.1f} vs lavapipe{total}")
    if ICD_ENV in ns and LAYER_ENV in ns:
        icd, layer = sum(ns[ICD_ENV]), sum(ns[LAYER_ENV])
        print(f"  layer vs ICD only  x{layer / icd:.2f}, the layer adds {layer - icd:+.0f} ns per {WHAT[mode]}"
              + (" (recording and its share of vkEndCommandBuffer)" if mode in RECORDING else ""))
    if mode in FRAMES:
        for name, r in runs.items():
            cpu = r["cpu_ns_per_call"]
            print(f"  {name:18s} {cpu / 1e3:10.1f} us process CPU per frame   x{cpu / runs[LAVAPIPE_ENV]['cpu_ns_per_call']:7.1f}"
                  " vs lavapipe")
    if mode in RECORDING:
        print(f"  the buffer of {calls} {WHAT[mode]} submitted once, then vkQueueWaitIdle:")
        for name, r in runs.items():
            print(f"  {name:18s} submit {r['submit_ns'] / 1e3:10.1f} us   wait {r['wait_ns'] / 1e6:8.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000, help="recorded draws/dispatches/copies per repetition")
    ap.add_argument("--submits", type=int, default=5_000,
                    help="vkQueueSubmit calls, recorded command buffers (per thread) and vkEnumeratePhysicalDeviceGroups "
                         "calls per repetition")
    ap.add_argument("--frames", type=int, default=300, help="frames per repetition (frame, passframe, tlframe)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per process; the best is reported")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the environments in turn this many times; each one's median run is printed")
    ap.add_argument("--cpu", type=int, help="pin every run to this CPU")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        ap.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    build()
    with bench_environments() as envs:
        for mode in modes:
            calls = args.calls if mode in RECORDING else args.frames if mode in FRAMES else args.submits
            if mode == "threads":
                print_threads(calls, args.reps, record_costs(envs, mode, calls, args.reps, 1, args.rounds, args.cpu),
                              record_costs(envs, mode, calls, args.reps, 2, args.rounds, args.cpu))
            else:
                print_costs(mode, calls, args.reps, record_costs(envs, mode, calls, args.reps, 1, args.rounds, args.cpu))


if __name__ == "__main__":
    main()
