"""docs/layer.md, docs/shims.md and docs/howto.md name files that exist, and docs/layer.md lists every module of
the layer (issue #24: the docs had cited a file the repo did not have and listed 9 of 18 modules)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _table_modules(doc: str) -> set[str]:
    return set(re.findall(r"^\| `([\w.]+\.(?:py|c))` \|", doc, flags=re.M))


def test_layer_doc_lists_every_layer_module_and_nothing_else():
    listed = _table_modules((REPO / "docs" / "layer.md").read_text())
    present = {p.name for p in (REPO / "layer").iterdir()
               if p.suffix in (".py", ".c") and p.name != "__init__.py"}
    assert listed == present


def test_paths_named_in_the_shim_and_layer_docs_exist():
    for doc in ("shims.md", "layer.md", "howto.md"):
        text = (REPO / "docs" / doc).read_text()
        named = set(re.findall(r"`((?:vkapi|layer|icd|schemas|hostd|tools|tests|spirv)/[\w/.]*)`", text))
        missing = sorted(n for n in named if not (REPO / n).exists())
        assert not missing, f"docs/{doc} names files that do not exist: {missing}"
