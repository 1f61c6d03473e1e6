"""Many sessions as tables (#29): export to Parquet and DuckDB queries over S generated sessions.

Input, generated into a temp dir (not timed): S sessions of E render-stage events each, by
bench_merge.generate (per submit two render passes, a dispatch, a buffer copy; labels, frames;
the layer's session log beside the driver's GPU trace), so S x E GPU events in all.
Measured, each phase in a child process (the same interpreter; wall time reported by the child,
peak RSS of the child from os.wait4 ru_maxrss: interpreter and imports included):
  1. merge: merge_session() of every session, one after the other (what `tessera export` does
     first for a session folder without a current merged trace);
  2. export: `export_parquet(all sessions)`: each merged trace read with the report's reader
     into the tables (advice by the advisor, counters from the trace's args), a row group per
     session;
  3. query: DuckDB over the Parquet files (`tessera sql DIR`): four queries, each timed
     (GPU time per session and queue; p95 of a pass's GPU time over all sessions; workloads per
     kind; a join of workloads and gpu_events).
The export's row counts are checked against what was generated.

Run: .venv/bin/python bench/bench_ci_tables.py [--sessions S] [--events-per-session E] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_merge import generate  # noqa: E402

MERGE = """
import json, sys, time
from pathlib import Path
from tessera.hostd.merge import merge_session
t = time.perf_counter()
events = 0
for s in sys.argv[1:]:
    events += merge_session(Path(s), progress=False).gpu_events
print(json.dumps({"seconds": time.perf_counter() - t, "events": events}))
"""
EXPORT = """
import json, sys, time
from pathlib import Path
from tessera.hostd.ci.tables import export_parquet
t = time.perf_counter()
r = export_parquet([Path(s) for s in sys.argv[2:]], Path(sys.argv[1]))
print(json.dumps({"seconds": time.perf_counter() - t, "rows": r.rows,
                  "bytes": sum(f.stat().st_size for f in r.files)}))
"""
QUERY = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from tessera.hostd.ci.tables import query
out = {}
for name, sql in json.loads(sys.argv[2]).items():
    t = time.perf_counter()
    r = query(sql, [Path(sys.argv[1])])
    out[name] = {"seconds": time.perf_counter() - t, "rows": len(r.rows), "first": [str(v) for v in r.rows[0]]}
print(json.dumps({"seconds": time.perf_counter() - t0, "queries": out}))
"""
QUERIES = {
    "GPU time per session and queue": "SELECT session, queue, sum(duration_ns) FROM gpu_events GROUP BY ALL",
    "p95 of 'Frame * / Pass 0' over all sessions":
        "SELECT approx_quantile(gpu_ns, 0.95), count(*) FROM workloads WHERE label_path LIKE '% / Pass 0'",
    "workloads per kind": "SELECT kind, count(*), sum(gpu_ns) FROM workloads GROUP BY kind ORDER BY kind",
    "join workloads x gpu_events (fragment time of render passes per session)":
        "SELECT w.session, sum(e.duration_ns) FROM workloads w JOIN gpu_events e "
        "USING (session, process, frame, label_path, kind, ordinal) "
        "WHERE w.kind = 'render_pass' AND e.queue = 'fragment' GROUP BY ALL ORDER BY 2 DESC LIMIT 5",
}


def child(code: str, *args: str) -> tuple[dict, int]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child failed ({os.waitstatus_to_exitcode(status)})")
    return json.loads(out), usage.ru_maxrss * 1024     # ru_maxrss is KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=200, help="sessions (default 200; the issue asks 1000)")
    ap.add_argument("--events-per-session", type=int, default=2_000,
                    help="render-stage events per session (default 2000; the issue asks 10,000)")
    ap.add_argument("--keep", type=Path, default=None, help="generate into this folder and keep it")
    args = ap.parse_args()
    tmp = None
    if args.keep:
        root = args.keep
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="tessera-bench-ci-")
        root = Path(tmp.name)
    try:
        t = time.perf_counter()
        sessions = []
        for i in range(args.sessions):
            s = root / f"s{i:05d}"
            s.mkdir()
            generate(s, args.events_per_session)
            sessions.append(str(s))
        total = args.sessions * args.events_per_session
        print(f"ci tables: {args.sessions:,} sessions x {args.events_per_session:,} render-stage events = {total:,} "
              f"(generated in {time.perf_counter() - t:.1f} s, not counted)", flush=True)
        m, m_rss = child(MERGE, *sessions)
        assert m["events"] == total, m
        print(f"  merge every session:   {m['seconds']:7.1f} s  {total / m['seconds']:>10,.0f} events/s  "
              f"peak RSS {m_rss / 2**20:5.0f} MiB", flush=True)
        out = root / "tables"
        e, e_rss = child(EXPORT, str(out), *sessions)
        assert e["rows"]["sessions"] == args.sessions and e["rows"]["gpu_events"] == total, e
        print(f"  export --format parquet: {e['seconds']:5.1f} s  {total / e['seconds']:>10,.0f} events/s  "
              f"peak RSS {e_rss / 2**20:5.0f} MiB  ({e['bytes'] / 1e6:.1f} MB of Parquet; rows: "
              + ", ".join(f"{k} {v:,}" for k, v in e["rows"].items()) + ")", flush=True)
        q, q_rss = child(QUERY, str(out), json.dumps(QUERIES))
        print(f"  DuckDB over the files: {q['seconds']:7.2f} s for {len(QUERIES)} queries (with import)  "
              f"peak RSS {q_rss / 2**20:5.0f} MiB")
        for name, r in q["queries"].items():
            print(f"    {r['seconds'] * 1e3:8.1f} ms  {name} ({r['rows']} rows; first {r['first']})")
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
