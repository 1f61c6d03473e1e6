"""Helpers for the integration tests (imported by name: the tests' folder is on sys.path)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def lavapipe_manifest() -> str:
    from tessera.icd.backend import default_manifest

    return str(default_manifest())


def run(argv, env, timeout=300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout, **kw)
