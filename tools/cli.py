"""The `tessera` command. Subcommands are imported only when invoked, so
`tessera --help` loads neither cffi nor the Vulkan registry."""
from __future__ import annotations

import importlib

import click

COMMANDS = {
    "run": ("tessera.tools.cmd_run", "run", "Run a Vulkan application on the emulated Mali GPU with the layer."),
    "doctor": ("tessera.tools.doctor", "doctor", "Report what is installed and what is missing, with the fix."),
    "demo": ("tessera.tools.demo", "demo", "Run the example applications end to end under Tessera."),
    "spirv": ("tessera.spirv.cli", "spirv", "SPIR-V tools: disassemble and reflect."),
    "compile": ("tessera.compiler.cli", "compile_command",
                "Mali Offline Compiler-style report of a shader (registers, spills, cycles per pipe)."),
    "hostd": ("tessera.hostd.cli", "hostd", "Receive the layer's stream into durable session logs."),
    "merge": ("tessera.hostd.cli", "merge", "Merge a session's logs and GPU trace into one Perfetto trace."),
    "report": ("tessera.hostd.cli", "report", "Summarise a session or merged trace (frames, workloads, GPU time)."),
    "view": ("tessera.hostd.cli", "view", "Serve a trace on 127.0.0.1 for ui.perfetto.dev and print the link."),
    "export": ("tessera.tools.cmd_export", "export",
               "Export sessions for other tools (--format arm: Arm's viewer; --format parquet: tables)."),
    "sql": ("tessera.tools.cmd_export", "sql", "Query the tables of many sessions with SQL (DuckDB, embedded)."),
    "diff": ("tessera.tools.cmd_diff", "diff",
             "Compare two sessions or merged traces workload by workload (GPU time, passes, shaders)."),
    "check": ("tessera.tools.cmd_check", "check",
              "Hold a session to a GPU budget (TOML) or a baseline; exit 1 when broken, JUnit XML."),
    "counters": ("tessera.tools.cmd_counters", "counters",
                 "Mali counters per workload or per frame (Arm's names; --csv as Arm's layer_gpu_profile)."),
    "regions": ("tessera.hostd.regions", "regions",
                "Heatmaps (PNG) or grids (--json) of per-region counters (tessera run --regions)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(package_name="tessera")
def main() -> None:
    """Tessera: profile Vulkan applications on an emulated Arm Mali GPU."""


if __name__ == "__main__":
    main()
