"""Where build outputs live: `<source root>/build`, or $TESSERA_BUILD_DIR.

Read once at import; the build folder is git-ignored and holds the shims,
their manifests, generated Python and compiled examples.
"""
from __future__ import annotations

import os
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = Path(os.environ.get("TESSERA_BUILD_DIR") or SOURCE_ROOT / "build").resolve()
GEN_DIR = BUILD_DIR / "gen"
LAYER_MANIFEST_DIR = BUILD_DIR / "manifests" / "layer"
ICD_MANIFEST_DIR = BUILD_DIR / "manifests" / "icd"
