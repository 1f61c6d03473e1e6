"""Tessera in CI (#29): a session read as workloads matched by identity (runs.py), `tessera diff`
(diff.py), budgets and their JUnit/Markdown verdicts (budget.py), Parquet tables and DuckDB
queries over many sessions (tables.py). The click commands are in tools/cmd_diff.py,
cmd_check.py, cmd_export.py; docs/ci.md says what each compares and why."""
