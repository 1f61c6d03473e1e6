"""tools/backend_setup.py without network or apt: reading the machine's sources, the private
backports entry, the stamp that makes a second run instant, and the fallbacks that keep
`make setup` going (another distribution, offline, a library that does not load here)."""
from __future__ import annotations

import json

import pytest

from tessera.tools import backend_setup as bs

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
EMBEDDED_KEY = """\
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb
URIs: https://other.example/debian
Suites: bookworm
Components: main contrib
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF...
 -----END PGP PUBLIC KEY BLOCK-----
"""
ONE_LINE = """\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/etc/apt/keyrings/debian.gpg] http://one.example/debian bookworm main non-free
deb http://one.example/debian bookworm-updates main
"""


def _sources(tmp_path, name: str, text: str):
    d = tmp_path / "sources.list.d"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return (tmp_path / "sources.list", d)


def test_deb822_entry_gives_uri_and_keyring(tmp_path):
    src = bs.machine_source(places=_sources(tmp_path, "debian.sources", DEB822))
    assert src == bs.AptSource("http://mirror.example/debian", "/usr/share/keyrings/debian-archive-keyring.gpg")
    assert src.backports_entry() == ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\n"
                                     "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


def test_embedded_key_is_kept_and_deb_src_skipped(tmp_path):
    src = bs.machine_source(places=_sources(tmp_path, "other.sources", EMBEDDED_KEY))
    assert src.uri == "https://other.example/debian"
    assert "BEGIN PGP PUBLIC KEY BLOCK" in src.signed_by
    entry = src.backports_entry()
    assert "\n -----END PGP PUBLIC KEY BLOCK-----\n" in entry   # continuation lines stay deb822


def test_one_line_format(tmp_path):
    (tmp_path / "sources.list").write_text(ONE_LINE)
    src = bs.machine_source(places=(tmp_path / "sources.list", tmp_path / "none"))
    assert src == bs.AptSource("http://one.example/debian", "/etc/apt/keyrings/debian.gpg")


def test_no_bookworm_entry(tmp_path):
    with pytest.raises(bs.SetupError, match="no apt sources entry for bookworm"):
        bs.machine_source(places=_sources(tmp_path, "x.sources", DEB822.replace("bookworm ", "trixie ")))


@pytest.fixture
def private(tmp_path, monkeypatch):
    """build/backend and build/apt redirected into tmp_path."""
    backend = tmp_path / "backend"
    backend.mkdir()
    for name, value in {"PRIVATE_BACKEND_DIR": backend, "PRIVATE_MANIFEST": backend / "lvp_icd.json",
                        "ROOT": backend / "root", "STAMP": backend / "stamp.json",
                        "APT_DIR": tmp_path / "apt"}.items():
        monkeypatch.setattr(bs, name, value)
    monkeypatch.setattr(bs, "os_codename", lambda: "bookworm")
    monkeypatch.setattr(bs, "machine_source", lambda: bs.AptSource("http://mirror.example/debian", None))
    return backend


def test_other_distribution_uses_the_system_lavapipe(monkeypatch):
    monkeypatch.setattr(bs, "os_codename", lambda: "trixie")
    line = bs.setup()
    assert line.startswith("backend: trixie is not Debian 12") and "using the system lavapipe" in line


def test_offline_falls_back_in_one_line(private, monkeypatch):
    def offline(argv, cwd=None, timeout=300):
        raise bs.SetupError("apt-get -o failed: E: Failed to fetch ... Temporary failure resolving")

    monkeypatch.setattr(bs, "_run", offline)
    line = bs.setup()
    assert "\n" not in line
    assert line.startswith("backend: could not get Mesa 25 from bookworm-backports")
    assert "using the system lavapipe" in line
    assert not (private / "lvp_icd.json").exists()
    assert bs.main([]) == 0


def test_fetched_once_then_stamped(private, monkeypatch, tmp_path):
    library = private / "root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
    calls = []

    def fake_fetch(source):
        calls.append(source)
        return tmp_path / "mesa-vulkan-drivers_25.0.7-2~bpo12+1_amd64.deb"

    def fake_extract(deb):
        library.parent.mkdir(parents=True, exist_ok=True)
        library.write_bytes(b"\x7fELF")
        return "25.0.7-2~bpo12+1", library

    monkeypatch.setattr(bs, "fetch", fake_fetch)
    monkeypatch.setattr(bs, "extract", fake_extract)
    monkeypatch.setattr(bs, "unresolved", lambda lib: [])
    first = bs.setup()
    assert "Mesa 25.0.7-2~bpo12+1 lavapipe from bookworm-backports as a private copy" in first
    manifest = json.loads((private / "lvp_icd.json").read_text())
    assert manifest["ICD"]["library_path"] == str(library.resolve())
    second = bs.setup()
    assert second == f"backend: Mesa 25.0.7-2~bpo12+1 lavapipe (private copy, {private / 'lvp_icd.json'})"
    assert len(calls) == 1                               # the stamp matched: no apt, no network
    bs.setup(refresh=True)
    assert len(calls) == 2


def test_library_that_does_not_load_here_is_not_used(private, monkeypatch, tmp_path):
    library = private / "root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
    monkeypatch.setattr(bs, "fetch", lambda source: tmp_path / "x.deb")
    monkeypatch.setattr(bs, "extract", lambda deb: ("25.0.7", library))
    monkeypatch.setattr(bs, "unresolved", lambda lib: ["libfoo.so.1 => not found"])
    line = bs.setup()
    assert "does not load here (libfoo.so.1 => not found)" in line and "using the system lavapipe" in line
    assert not (private / "lvp_icd.json").exists()
