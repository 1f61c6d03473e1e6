"""`tessera export SESSION --format arm` (the command: tools/cmd_export.py): a session as the pair Arm's GPU
Timeline viewer opens.

Role: per application process, `<process>-<pid>.metadata` (Arm's host file,
arm_metadata.arm_frames: u32 length + JSON frames, flushed at each frame
boundary and once at the end) and `<process>-<pid>.perfetto-trace` (that
process's packet sequences of the session's `gpu*.perfetto-trace`, copied
byte for byte: Arm's reader keys metadata by `t<tagID>` alone, so each
process needs a trace of its own). Stage names are already Arm's driver
vocabulary (icd/trace.py ARM_STAGE). Single-threaded; reads the session,
writes only into the output folder (0700 when it creates it; files 0600, replaced atomically
through an exclusive temporary: schemas/files.py).

What Arm's format cannot carry is left out, listed in docs/arm.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tessera.schemas.files import AtomicOutput, OutputError, private_folder
from tessera.schemas.perfetto import TracePacket, iter_raw

from .arm_metadata import METADATA_SUFFIX, arm_frames, write_metadata
from .merge import find_inputs
from .metadata import load
from .storage import safe_name

TRACE_SUFFIX = ".perfetto-trace"
DEFAULT_FOLDER = "arm"


@dataclass
class ExportResult:
    out: Path
    files: list[Path] = field(default_factory=list)
    frames: dict[int, int] = field(default_factory=dict)       # pid -> frames written
    packets: dict[int, int] = field(default_factory=dict)      # pid -> GPU packets written
    problems: list[str] = field(default_factory=list)


class ExportError(Exception):
    pass


def split_gpu_traces(traces: list[Path], names: dict[int, str], out: Path, result: ExportResult) -> None:
    """Copy each process's packet sequences into `<name>-<pid>.perfetto-trace` (the pid of a
    sequence: its interned graphics context; a sequence without one goes to the only process)."""
    only = next(iter(names)) if len(names) == 1 else None
    files: dict[int, AtomicOutput] = {}
    try:
        for fi, path in enumerate(traces):
            owner: dict[int, int | None] = {}

            def problem(offset: int, message: str, path=path) -> None:
                result.problems.append(f"{path}: at byte {offset}: {message}")

            for buf, start, body, end, offset in iter_raw(path, problem=problem):
                p = TracePacket()
                try:
                    p.ParseFromString(buf[body:end])
                except Exception as e:  # protobuf DecodeError: one packet only
                    result.problems.append(f"{path}: undecodable packet ending at byte {offset} ({e}); skipped")
                    continue
                seq = p.trusted_packet_sequence_id
                if p.HasField("interned_data") and p.interned_data.graphics_contexts:
                    owner[seq] = p.interned_data.graphics_contexts[0].pid
                pid = owner.get(seq, only)
                if pid is None:
                    continue
                f = files.get(pid)
                if f is None:
                    f = files[pid] = AtomicOutput(out / f"{safe_name(names.get(pid, 'app'))}-{pid}{TRACE_SUFFIX}")
                f.write(buf[start:end])
                result.packets[pid] = result.packets.get(pid, 0) + 1
        for f in files.values():
            f.commit()
            result.files.append(f.path)
    finally:
        for f in files.values():
            f.abort()       # (nothing once committed)


def export_arm(session: Path, out: Path | None = None) -> ExportResult:
    session = Path(session)
    if not session.is_dir():
        raise ExportError(f"{session} is not a folder")
    inputs = find_inputs(session)   # what processes that ended left staged joins its file first
    logs, traces, problems = inputs.logs + inputs.spools, inputs.gpu_traces, inputs.problems
    if not logs:
        raise ExportError(f"no session log (*.tessera-log) or spool in {session}: nothing to export")
    out = Path(out) if out else session / DEFAULT_FOLDER
    try:
        private_folder(out)
    except OSError as e:
        raise ExportError(f"cannot create {out}: {e.strerror or e}") from None
    result = ExportResult(out, problems=problems)
    index = load(logs)
    result.problems.extend(index.problems)
    names = {pid: p.process or "app" for pid, p in index.processes.items()}
    try:
        for pid, proc in sorted(index.processes.items()):
            target = out / f"{safe_name(names[pid])}-{pid}{METADATA_SUFFIX}"
            result.frames[pid] = write_metadata(target, arm_frames(proc))
            result.files.append(target)
        if traces:
            split_gpu_traces(traces, names, out, result)
    except OutputError as e:        # a full disk: one line; the files written before it stay whole
        raise ExportError(f"{e}; written before it: {', '.join(map(str, result.files)) or 'nothing'}") from None
    if not traces:
        result.problems.append(f"no gpu*.perfetto-trace in {session}: metadata only")
    return result

