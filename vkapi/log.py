"""Logging for code running inside an application's process (layer, driver).

Settings come from the environment once, at the shim's entry, into `LogSettings`.
Trace logging is off by default (TESSERA_LOG=off|error|info|debug,
TESSERA_LOG_FILE=path, default stderr). A Python exception inside an
intercepted call is an error that loses profiling data, so the first one per
command is always reported with its traceback, whatever the level; later ones
of the same command are counted, not printed.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass

LEVELS = {"off": logging.CRITICAL + 10, "error": logging.ERROR, "info": logging.INFO, "debug": logging.DEBUG}


@dataclass(frozen=True)
class LogSettings:
    level: int
    path: str | None

    @classmethod
    def from_environ(cls, environ=os.environ) -> "LogSettings":
        name = environ.get("TESSERA_LOG", "off").lower()
        return cls(LEVELS.get(name, LEVELS["off"]), environ.get("TESSERA_LOG_FILE") or None)


def configure(name: str, settings: LogSettings) -> logging.Logger:
    log = logging.getLogger(name)
    log.propagate = False
    log.setLevel(settings.level)
    if not log.handlers:
        handler = logging.FileHandler(settings.path) if settings.path else logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"tessera[{os.getpid()}] %(name)s %(levelname)s: %(message)s"))
        log.addHandler(handler)
    return log


class HookErrors:
    """Reports exceptions raised inside hooks: first per command with a traceback."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def report(self, command: str, where: str) -> None:
        with self._lock:
            n = self.counts.get(command, 0) + 1
            self.counts[command] = n
        if n == 1:
            # Always reported: use the handler directly so level "off" cannot hide it.
            record = self.log.makeRecord(self.log.name, logging.ERROR, __file__, 0,
                                         "exception in %s (%s)",
                                         (command, where), sys.exc_info())
            for h in self.log.handlers:
                h.handle(record)
