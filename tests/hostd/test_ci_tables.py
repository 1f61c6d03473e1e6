"""`tessera export --format parquet` and `tessera sql` (#29) on hand-built sessions merged by the
real merge: the tables' schema and version, their numbers against the merged traces read with
the Perfetto protos (not through the export), DuckDB over in-memory tables and over the Parquet
files, clear errors, and `tessera --help` loading neither pyarrow nor duckdb."""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from ci_builders import make_session
from click.testing import CliRunner

from tessera.hostd.ci.tables import SCHEMA_VERSION, TABLES, TablesError, export_parquet, query
from tessera.schemas.perfetto import read_packets
from tessera.tools.cmd_export import export, sql

SHADOW = (("frame", "shadow"), "render_pass", (100, 200), {"draw_call_count": 1})
MAIN = (("frame", "main"), "render_pass", (150, 300), {"draw_call_count": 2})
COPY = ((), "buffer_transfer", (50,), {"bytes": 64})
BLUR = (("post", "blur"), "dispatch", (70,), {"groups": [4, 1, 1]})


@pytest.fixture
def three(tmp_path):
    return [make_session(tmp_path / "a", [[SHADOW, MAIN, COPY]]),
            make_session(tmp_path / "b", [[SHADOW, MAIN], [BLUR, MAIN, COPY]], first_tag=40),
            make_session(tmp_path / "c", [[MAIN, COPY, COPY]], pid=777, process="other")]


def per_queue_from_protos(trace) -> dict[str, int]:
    """GPU time per queue, straight from the trace's packets (interned specs by sequence)."""
    specs, out = {}, {}
    for p in read_packets(trace):
        for s in p.interned_data.gpu_specifications:
            specs[(p.trusted_packet_sequence_id, s.iid)] = s.name
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            q = specs[(p.trusted_packet_sequence_id, e.hw_queue_iid)]
            out[q] = out.get(q, 0) + e.duration
    return out


def test_export_writes_every_table_with_its_version(three, tmp_path):
    out = tmp_path / "tables"
    r = export_parquet([t.parent for t in three], out)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
    for t in TABLES:
        meta = pq.read_schema(out / f"{t}.parquet").metadata
        assert meta[b"tessera.schema_version"] == str(SCHEMA_VERSION).encode() and meta[b"tessera.table"] == t.encode()
    events = sum(1 for t in three for p in read_packets(t) if p.HasField("gpu_render_stage_event"))
    assert r.rows["gpu_events"] == events == pq.read_table(out / "gpu_events.parquet").num_rows
    assert pq.read_table(out / "sessions.parquet").column("schema_version").to_pylist() == [SCHEMA_VERSION] * 3
    assert oct((out / "workloads.parquet").stat().st_mode & 0o777) == "0o600"


def test_the_advice_table_is_the_advisors_and_can_be_left_out(three, tmp_path):
    """Hand-built sessions carry no counters (no `Mali…` args): an empty counters table, NULL
    counter_gpu; their advice is the advisor's (`analyse`: passes whose outputs nothing reads, as
    these passes name no attachments; the planted app's is checked in
    tests/integration/test_ci_commands.py), or empty with --no-advice."""
    from tessera.hostd.advice import analyse

    folders = [t.parent for t in three]
    r = export_parquet(folders, tmp_path / "with")
    want = sum(len(analyse(f).findings) for f in folders)
    assert r.rows["advice"] == want > 0 and r.rows["counters"] == 0
    sessions = pq.read_table(tmp_path / "with" / "sessions.parquet").to_pylist()
    assert [s["counter_gpu"] for s in sessions] == [None] * 3 and all(s["advice_gpu"] for s in sessions)
    r = CliRunner().invoke(export, [*map(str, folders), "--format", "parquet", "-o", str(tmp_path / "without"),
                                    "--no-advice"])
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "without" / "advice.parquet").num_rows == 0
    assert pq.read_table(tmp_path / "without" / "sessions.parquet").column("advice_gpu").to_pylist() == [None] * 3


def test_sql_across_three_sessions_equals_the_traces(three, tmp_path):
    sessions = [t.parent for t in three]
    q = "SELECT session, queue, sum(duration_ns) AS ns FROM gpu_events GROUP BY ALL ORDER BY ALL"
    got = {(s, qu): ns for s, qu, ns in query(q, sessions).rows}
    want = {(str(s), qu): ns for s, t in zip(sessions, three) for qu, ns in per_queue_from_protos(t).items()}
    assert got == want
    # the same over the Parquet files, and through the command
    export_parquet(sessions, tmp_path / "tables")
    assert query(q, [tmp_path / "tables"]).rows == query(q, sessions).rows
    r = CliRunner().invoke(sql, ["SELECT label_path, count(*) AS n, sum(gpu_ns) AS ns FROM workloads "
                                 "WHERE kind = 'render_pass' GROUP BY ALL ORDER BY ALL", *map(str, sessions),
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"label_path": "frame / main", "n": 4, "ns": 1800},
                                    {"label_path": "frame / shadow", "n": 2, "ns": 600}]


def test_the_export_command_and_errors(three, tmp_path):
    runner = CliRunner()
    r = runner.invoke(export, [*(str(t) for t in three), "--format", "parquet", "-o", str(tmp_path / "t")])
    assert r.exit_code == 0 and "3 session(s): sessions 3, workloads 11, gpu_events 17" in r.output, r.output
    bad = runner.invoke(sql, ["SELECT nope FROM workloads", str(three[0])])
    assert bad.exit_code == 1 and "the query failed" in bad.output and "Traceback" not in bad.output
    mixed = runner.invoke(sql, ["SELECT 1", str(three[0]), str(tmp_path / "t")])
    assert mixed.exit_code == 1 and "not both" in mixed.output
    arm = runner.invoke(export, [str(three[0]), str(three[1]), "--format", "arm"])
    assert arm.exit_code == 2 and "one session folder" in arm.output
    twice = runner.invoke(export, [str(three[0]), str(three[0]), "--format", "parquet", "-o", str(tmp_path / "u")])
    assert twice.exit_code == 1 and "given twice" in twice.output


def test_an_export_of_another_schema_version_is_refused(three, tmp_path):
    out = tmp_path / "t"
    export_parquet([three[0]], out)
    table = pq.read_table(out / "workloads.parquet")
    pq.write_table(table.replace_schema_metadata({b"tessera.schema_version": b"99"}), out / "workloads.parquet")
    with pytest.raises(TablesError, match=f"schema version 99; this Tessera reads version {SCHEMA_VERSION}"):
        query("SELECT 1", [out])


def test_help_loads_neither_pyarrow_nor_duckdb():
    code = ("import sys; from tessera.tools.cli import main\n"
            "for args in (['--help'], ['diff', '--help'], ['check', '--help'], ['sql', '--help'], ['export', '--help']):\n"
            "    try: main(args)\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb', 'cffi')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert all(name in out for name in ("diff", "check", "sql", "export"))
    assert out.strip().splitlines()[-1] == "[]"
