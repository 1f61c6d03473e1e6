"""Many sessions as tables: `tessera export --format parquet` and `tessera sql` (DuckDB, embedded).

Role: `session_tables(target)` turns one session (folder or merged trace, read by runs.read_run)
into Arrow record batches of the stable tables (TABLES, schema version SCHEMA_VERSION,
docs/ci.md "Tables"): sessions, workloads, gpu_events, shader_blocks (from the session
logs of an instrumented session folder: hostd/shaders.py's index), counters (every workload's,
frame's and the session's Mali counters, one row per counter: metrics.run_counters, the sums
`tessera counters` gives) and advice (the advisor's findings: metrics.run_advice, what
`tessera report --json` gives). `export_parquet` writes one
Parquet file per table into a folder, a row group per session, so memory stays bounded by one
session whatever their number; each file carries the schema version in its metadata.
`query` runs SQL with DuckDB over those tables, in memory (Arrow tables registered as views)
or over an export folder's Parquet files. Nothing here aggregates: the engines do.

pyarrow and duckdb are imported here only, so `tessera --help` and the other commands never
load them. Single-threaded; reads the sessions, writes only into the output folder.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import shaders as shader_cost
from .runs import Run, RunError, read_run

# 2: the counters and advice tables (version 1 had none), sessions.counter_gpu
SCHEMA_VERSION = 2
METADATA_KEY = b"tessera.schema_version"
TABLE_KEY = b"tessera.table"

_MAP = pa.map_(pa.string(), pa.string())
_QUEUE_MAP = pa.map_(pa.string(), pa.int64())
SCHEMAS: dict[str, pa.Schema] = {
    "sessions": pa.schema([
        ("session", pa.string()), ("trace", pa.string()), ("schema_version", pa.int32()),
        ("processes", pa.list_(pa.string())), ("frames", pa.int64()), ("submits", pa.int64()),
        ("gpu_events", pa.int64()), ("workloads", pa.int64()), ("gpu_ns", pa.int64()),
        ("queue_ns", _QUEUE_MAP), ("internal_ns", pa.int64()), ("events_without_metadata", pa.int64()),
        ("counter_gpu", pa.string()), ("advice_gpu", pa.string()),
    ]),
    "workloads": pa.schema([
        ("session", pa.string()), ("process", pa.string()), ("frame", pa.int64()), ("label_path", pa.string()),
        ("labels", pa.list_(pa.string())), ("kind", pa.string()), ("ordinal", pa.int64()), ("name", pa.string()),
        ("internal", pa.bool_()), ("tag", pa.int64()), ("submit", pa.int64()), ("events", pa.int64()),
        ("gpu_ns", pa.int64()), ("queue_ns", _QUEUE_MAP), ("draw_calls", pa.int64()),
        ("shader_thread_ops", pa.int64()), ("args", _MAP),
    ]),
    "gpu_events": pa.schema([
        ("session", pa.string()), ("process", pa.string()), ("pid", pa.int64()), ("frame", pa.int64()),
        ("label_path", pa.string()), ("kind", pa.string()), ("ordinal", pa.int64()), ("internal", pa.bool_()),
        ("queue", pa.string()), ("stage", pa.string()), ("name", pa.string()), ("timestamp_ns", pa.int64()),
        ("duration_ns", pa.int64()), ("render_pass_instance_id", pa.int64()), ("event_id", pa.int64()),
        ("tag", pa.int64()), ("submit", pa.int64()),
    ]),
    "shader_blocks": pa.schema([
        ("session", pa.string()), ("process", pa.string()), ("pid", pa.int64()), ("submit", pa.int64()),
        ("tag", pa.int64()), ("result_index", pa.int64()), ("command", pa.string()), ("draw", pa.int64()),
        ("stage", pa.string()), ("entry", pa.string()), ("block", pa.int64()), ("executions", pa.int64()),
        ("fma", pa.int64()), ("cvt", pa.int64()), ("sfu", pa.int64()), ("ls", pa.int64()), ("tex", pa.int64()),
        ("var", pa.int64()), ("thread_ops", pa.int64()),
    ]),
    "counters": pa.schema([
        ("session", pa.string()), ("scope", pa.string()), ("process", pa.string()), ("frame", pa.int64()),
        ("label_path", pa.string()), ("kind", pa.string()), ("ordinal", pa.int64()), ("internal", pa.bool_()),
        ("tag", pa.int64()), ("submit", pa.int64()), ("counter", pa.string()), ("value", pa.float64()),
        ("units", pa.string()),
    ]),
    "advice": pa.schema([
        ("session", pa.string()), ("rule", pa.string()), ("severity", pa.string()), ("title", pa.string()),
        ("what", pa.string()), ("fix", pa.string()), ("frame", pa.int64()), ("workload", pa.string()),
        ("label_path", pa.string()), ("kind", pa.string()), ("tag", pa.int64()), ("node", pa.int64()),
        ("attachment", pa.int64()), ("draw", pa.int64()), ("resource", pa.string()), ("saves_bytes", pa.int64()),
        ("saves_cycles", pa.int64()), ("saves_ns", pa.int64()),
    ]),
}
TABLES = tuple(SCHEMAS)


class TablesError(Exception):
    """An input or output problem, one line for the command."""


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _batch(table: str, rows: dict[str, list]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(rows, schema=SCHEMAS[table])


def _columns(table: str) -> dict[str, list]:
    return {name: [] for name in SCHEMAS[table].names}


def _shader_blocks(session: str, folder: Path, names: dict[int, str]) -> dict[str, list]:
    """Every executed basic block of every instrumented action (session logs; hostd/shaders.py)."""
    from ..merge import find_inputs
    from ..metadata import load
    from ..shaders import PIPES, ShaderIndex

    cols = _columns("shader_blocks")
    inputs = find_inputs(folder)
    meta = load(inputs.logs + inputs.spools)
    for pid in sorted(meta.processes):
        proc = meta.processes[pid]
        if not proc.instrumentation:
            continue
        index = ShaderIndex(proc)
        for sid, tag in sorted(proc.instrumentation):
            for a in index.actions(sid, tag):
                for s in a.stages:
                    for row in s.rows:
                        values = dict(zip(PIPES, row[2:8]))
                        for k, v in (("session", session), ("process", names.get(pid, proc.process or "?")),
                                     ("pid", pid), ("submit", sid), ("tag", tag), ("result_index", a.result_index),
                                     ("command", a.command), ("draw", a.draw), ("stage", s.stage),
                                     ("entry", s.entry), ("block", row[0]), ("executions", row[1]),
                                     *values.items(), ("thread_ops", sum(values.values()))):
                            cols[k].append(v)
    return cols


@dataclass
class SessionTables:
    run: Run
    batches: dict[str, pa.RecordBatch]


def session_tables(target: Path, session: str | None = None, advice: bool = True) -> SessionTables:
    """One session's rows of every table. `session`: its name in the `session` columns (default
    the path as given). `advice=False`: the advice table left empty and `sessions.advice_gpu`
    NULL (the advisor is most of an export's time: docs/benchmarks.md)."""
    from .metrics import NoCounters, run_advice, run_counters

    target = Path(target)
    name = session if session is not None else str(target)
    run = read_run(target)
    s = run.summary
    try:
        counters = run_counters(run)
    except NoCounters:
        counters = None
    analysis = run_advice(target) if advice else None
    out: dict[str, pa.RecordBatch] = {}
    out["sessions"] = _batch("sessions", {
        "session": [name], "trace": [str(run.source)], "schema_version": [SCHEMA_VERSION],
        "processes": [run.processes], "frames": [s.frames], "submits": [s.submits], "gpu_events": [s.gpu_events],
        "workloads": [sum(1 for w in run.workloads if not w.internal)], "gpu_ns": [sum(s.gpu_time_ns.values())],
        "queue_ns": [list(s.gpu_time_ns.items())], "internal_ns": [sum(s.internal_time_ns.values())],
        "events_without_metadata": [s.events_without_metadata],
        "counter_gpu": [counters.gpu if counters else None],
        "advice_gpu": [analysis.gpu.name + (" (assumed)" if analysis.gpu.assumed else "") if analysis else None]})
    ws = run.workloads
    shaders = [w.shader if shader_cost.OPS_KEY in w.args else None for w in ws]
    out["workloads"] = _batch("workloads", {
        "session": [name] * len(ws), "process": [w.process for w in ws], "frame": [w.frame for w in ws],
        "label_path": [w.label_path for w in ws], "labels": [list(w.labels) for w in ws],
        "kind": [w.kind for w in ws], "ordinal": [w.ordinal for w in ws], "name": [w.name for w in ws],
        "internal": [w.internal for w in ws], "tag": [w.tag for w in ws], "submit": [w.submit for w in ws],
        "events": [w.events for w in ws], "gpu_ns": [w.gpu_ns for w in ws],
        "queue_ns": [list(w.queue_ns.items()) for w in ws],
        "draw_calls": [_int(w.args.get("draw_call_count")) for w in ws],
        "shader_thread_ops": [sh["thread_ops"] if sh else None for sh in shaders],
        "args": [list(w.args.items()) for w in ws]})
    es, placed = run.events, run.placed
    out["gpu_events"] = _batch("gpu_events", {
        "session": [name] * len(es), "process": [e["process"] for e in es], "pid": [p[0] for p in placed],
        "frame": [e["frame"] for e in es], "label_path": [p[2].label_path for p in placed],
        "kind": [p[2].kind for p in placed], "ordinal": [p[2].ordinal for p in placed],
        "internal": [p[2].internal for p in placed], "queue": [e["queue"] for e in es],
        "stage": [e["stage"] for e in es], "name": [e["name"] for e in es], "timestamp_ns": [p[1] for p in placed],
        "duration_ns": [e["duration_ns"] for e in es],
        "render_pass_instance_id": [e["render_pass_instance_id"] for e in es],
        "event_id": [e["event_id"] for e in es], "tag": [p[2].tag for p in placed],
        "submit": [p[2].submit for p in placed]})
    names = {}
    if target.is_dir() and any(shader_cost.OPS_KEY in w.args for w in ws):     # instrumented: read its logs
        for pid, _, w in run.placed:
            if pid is not None:
                names.setdefault(pid, w.process)
        out["shader_blocks"] = _batch("shader_blocks", _shader_blocks(name, target, names))
    else:
        out["shader_blocks"] = _batch("shader_blocks", _columns("shader_blocks"))
    out["counters"] = _batch("counters", _counter_rows(name, run, counters))
    out["advice"] = _batch("advice", _advice_rows(name, analysis.findings if analysis else []))
    return SessionTables(run, out)


def _counter_rows(session: str, run: Run, counters) -> dict[str, list]:
    """One row per counter of every workload (scope `workload`, its identity), every frame
    (`frame`) and the session (`session`); none when the session has no counters."""
    cols = _columns("counters")
    if counters is None:
        return cols

    def add(scope: str, values: dict[str, float], w=None, frame=None) -> None:
        for counter, value in values.items():
            for k, v in (("session", session), ("scope", scope), ("process", w.process if w else None),
                         ("frame", w.frame if w else frame), ("label_path", w.label_path if w else None),
                         ("kind", w.kind if w else None), ("ordinal", w.ordinal if w else None),
                         ("internal", w.internal if w else None), ("tag", w.tag if w else None),
                         ("submit", w.submit if w else None), ("counter", counter), ("value", float(value)),
                         ("units", counters.units.get(counter))):
                cols[k].append(v)

    for w in run.workloads:
        add("workload", counters.of(w), w)
    for frame, values in counters.frames.items():
        add("frame", values, frame=frame)
    add("session", counters.session)
    return cols


def _advice_rows(session: str, findings: list) -> dict[str, list]:
    cols = _columns("advice")
    for f in findings:
        for k, v in (("session", session), ("rule", f.rule), ("severity", f.severity), ("title", f.title),
                     ("what", f.what), ("fix", f.fix), ("frame", f.frame), ("workload", f.workload),
                     ("label_path", f.label_path), ("kind", f.kind), ("tag", f.tag), ("node", f.node),
                     ("attachment", f.attachment), ("draw", getattr(f, "draw", None)), ("resource", f.resource),
                     ("saves_bytes", f.saves_bytes),
                     ("saves_cycles", f.saves_cycles), ("saves_ns", f.saves_ns)):
            cols[k].append(v)
    return cols


def _metadata(table: str) -> dict[bytes, bytes]:
    return {METADATA_KEY: str(SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()}


@dataclass
class ExportResult:
    out: Path
    files: list[Path]
    rows: dict[str, int]
    sessions: int
    problems: list[str]


def _names(targets: list[Path]) -> list[str]:
    """Each input's `session` value: the path as given; duplicates refused (two names for one row set)."""
    names = [str(t) for t in targets]
    seen = set()
    for n in names:
        if n in seen:
            raise TablesError(f"{n} is given twice")
        seen.add(n)
    return names


def _sessions(targets: list[Path], problems: list[str], advice: bool = True) -> Iterator[dict[str, pa.RecordBatch]]:
    """Each target's batches, one session at a time (names checked first, before anything is
    read); its read problems appended to `problems`."""
    names = _names(targets)

    def each() -> Iterator[dict[str, pa.RecordBatch]]:
        for target, name in zip(targets, names):
            try:
                t = session_tables(target, name, advice)
            except RunError as e:
                raise TablesError(str(e)) from None
            problems.extend(t.run.problems)
            yield t.batches

    return each()


def export_parquet(targets: list[Path], out: Path, advice: bool = True) -> ExportResult:
    """One `<table>.parquet` per table in `out` (0700 when created; files 0600, each renamed into
    place once whole: schemas/files.py), a row group per session."""
    from tessera.schemas.files import AtomicOutput, OutputError, private_folder

    sessions = _sessions(targets, problems := [], advice)
    try:
        private_folder(out)
    except OSError as e:
        raise TablesError(f"cannot create {out}: {e.strerror or e}") from None
    outputs: dict[str, AtomicOutput] = {}
    writers: dict[str, pq.ParquetWriter] = {}
    rows = dict.fromkeys(TABLES, 0)
    try:
        for table in TABLES:
            outputs[table] = AtomicOutput(out / f"{table}.parquet")
            writers[table] = pq.ParquetWriter(outputs[table].file, SCHEMAS[table].with_metadata(_metadata(table)))
        for batches in sessions:
            for table, batch in batches.items():
                if batch.num_rows or table == "sessions":
                    writers[table].write_batch(batch)
                rows[table] += batch.num_rows
        for table in TABLES:
            writers.pop(table).close()
            outputs[table].commit()
    except OSError as e:
        raise TablesError(str(e) if isinstance(e, OutputError) else f"{out}: {e.strerror or e}") from None
    finally:
        for w in writers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001 - its output is discarded below anyway
                pass
        for o in outputs.values():
            o.abort()
    return ExportResult(out, [out / f"{t}.parquet" for t in TABLES], rows, len(targets), problems)


def is_export(path: Path) -> bool:
    """A folder `export_parquet` wrote (it has sessions.parquet)."""
    return path.is_dir() and (path / "sessions.parquet").is_file()


def check_export(folder: Path) -> None:
    """TablesError unless every table's file is there with this schema version (the version is
    checked first: an older export lacks the tables added since)."""
    present = [t for t in TABLES if (folder / f"{t}.parquet").is_file()]
    for table in present + [t for t in TABLES if t not in present]:
        path = folder / f"{table}.parquet"
        if not path.is_file():
            raise TablesError(f"{folder}: no {table}.parquet (not a `tessera export --format parquet` folder)")
        meta = pq.read_schema(path).metadata or {}
        version = meta.get(METADATA_KEY)
        if version != str(SCHEMA_VERSION).encode():
            raise TablesError(f"{path}: schema version {version.decode() if version else 'missing'}; "
                              f"this Tessera reads version {SCHEMA_VERSION}")


def _in_memory(targets: list[Path], advice: bool = True) -> tuple[dict[str, pa.Table], list[str]]:
    parts: dict[str, list[pa.RecordBatch]] = {t: [] for t in TABLES}
    for batches in _sessions(targets, problems := [], advice):
        for table, batch in batches.items():
            parts[table].append(batch)
    return {t: pa.Table.from_batches(b, schema=SCHEMAS[t]) for t, b in parts.items()}, problems


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    problems: list[str]


def query(sql: str, targets: list[Path]) -> QueryResult:
    """`sql` over the tables of `targets`: session folders and merged traces (read into memory),
    or export folders (their Parquet files, read by DuckDB), not both kinds at once."""
    import duckdb

    exports = [t for t in targets if is_export(Path(t))]
    if exports and len(exports) != len(targets):
        raise TablesError("give either sessions/traces or export folders, not both")
    con = duckdb.connect(":memory:")
    problems: list[str] = []
    try:
        if exports:
            for folder in exports:
                check_export(Path(folder))
            for table in TABLES:
                files = [str(Path(f) / f"{table}.parquet") for f in exports]
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({files!r}, union_by_name = true)")
        else:
            # the advisor only when the query names its table (a word of the SQL): most of the time
            import re

            tables, problems = _in_memory([Path(t) for t in targets],
                                          advice=re.search(r"\badvice\b", sql, re.IGNORECASE) is not None)
            for table, data in tables.items():
                con.register(table, data)
        try:
            cur = con.execute(sql)
        except duckdb.Error as e:
            raise TablesError(f"the query failed: {e}") from None
        columns = [d[0] for d in cur.description] if cur.description else []
        return QueryResult(columns, cur.fetchall(), problems)
    finally:
        con.close()


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def format_rows(r: QueryResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps([dict(zip(r.columns, row)) for row in r.rows], default=str, indent=2)
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(r.columns)
        w.writerows([[_cell(v) for v in row] for row in r.rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in row] for row in r.rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(r.columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r.columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    lines.append(f"({len(r.rows)} row{'s' if len(r.rows) != 1 else ''})")
    return "\n".join(lines)

