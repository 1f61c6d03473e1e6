"""`make setup`'s backend step: a private Mesa 25 lavapipe on Debian 12.

Role: on Debian 12 (bookworm) the system's lavapipe is Mesa 22.3 (Vulkan 1.3,
no maintenance5, shader objects or ray tracing). Debian's own archive carries
Mesa 25 for bookworm in the `bookworm-backports` suite. This module fetches
that `mesa-vulkan-drivers` package as a private copy, without touching the
system:

- a private apt configuration under build/apt/: its own sources folder with
  one deb822 entry naming `bookworm-backports` with the URI and Signed-By
  keyring of the machine's own `bookworm` entry (read from
  /etc/apt/sources.list.d/*.sources or the one-line lists; no mirror is
  hard-coded), its own lists and cache folders; apt verifies the suite's
  signature as it does for the rest of the archive;
- `apt-get download` of the package, `dpkg -x` into build/backend/root/;
- a check that the extracted libvulkan_lvp.so resolves every library and
  symbol against what is installed (`ldd -r`);
- build/backend/lvp_icd.json, a driver manifest whose library_path is the
  extracted library; `tessera.icd.backend.default_manifest()` prefers it.

The system's apt sources, lists and installed Mesa stay as they were.

Idempotent: build/backend/stamp.json records what was installed and from
which sources entry; a later run with the same fingerprint and the files in
place prints one line and returns (no network). `--refresh` fetches again.

Never fails `make setup`: on another distribution (which ships its own Mesa:
Debian 13 and Ubuntu 24.04+ have Mesa >= 24), offline, or on any failure it
prints one line saying the system lavapipe is used, and exits 0.

Run as `python -m tessera.tools.backend_setup [--refresh]`. Only the standard
library is used; no state outside build/.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tessera.icd.backend import PRIVATE_BACKEND_DIR, PRIVATE_MANIFEST, BackendError, system_manifest
from tessera.vkapi import paths

PACKAGE = "mesa-vulkan-drivers"
CODENAME = "bookworm"                 # the only release this step serves
SUITE = f"{CODENAME}-backports"
LIBRARY = "libvulkan_lvp.so"
APT_DIR = paths.BUILD_DIR / "apt"
ROOT = PRIVATE_BACKEND_DIR / "root"
STAMP = PRIVATE_BACKEND_DIR / "stamp.json"
FORMAT = 1                            # bump when the layout of build/backend changes
SOURCE_FILES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
OS_RELEASE = Path("/etc/os-release")


class SetupError(Exception):
    """The private backend cannot be set up; the message says why in one line."""


@dataclass(frozen=True)
class AptSource:
    """The machine's own entry for the release: where the archive is and which key signs it."""
    uri: str
    signed_by: str | None   # a keyring path, or an embedded key block (deb822), or None (apt's default keyrings)

    def backports_entry(self) -> str:
        lines = ["Types: deb", f"URIs: {self.uri}", f"Suites: {SUITE}", "Components: main"]
        if self.signed_by:
            # Multi-line values (an embedded key) keep their deb822 continuation lines.
            lines.append(f"Signed-By: {self.signed_by}")
        return "\n".join(lines) + "\n"


# ---- reading the machine's configuration -------------------------------------------------------

def os_codename(path: Path = OS_RELEASE) -> str | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key == "VERSION_CODENAME":
                return value.strip().strip('"') or None
    except OSError:
        pass
    return None


def _deb822_paragraphs(text: str) -> list[dict[str, str]]:
    paragraphs, current, key = [], {}, None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if current:
                paragraphs.append(current)
            current, key = {}, None
        elif raw[0] in " \t" and key is not None:
            current[key] += "\n" + raw.rstrip()
        else:
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            current[key] = value.strip()
    if current:
        paragraphs.append(current)
    return paragraphs


def _from_deb822(text: str, codename: str) -> AptSource | None:
    for p in _deb822_paragraphs(text):
        if p.get("enabled", "yes").lower() == "no" or "deb" not in p.get("types", "").split():
            continue
        if codename in p.get("suites", "").split() and p.get("uris"):
            return AptSource(p["uris"].split()[0], p.get("signed-by") or None)
    return None


def _from_one_line(text: str, codename: str) -> AptSource | None:
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        rest, options = line[4:].strip(), {}
        if rest.startswith("["):
            opts, _, rest = rest[1:].partition("]")
            options = dict(o.split("=", 1) for o in opts.split() if "=" in o)
        words = rest.split()
        if len(words) >= 2 and words[1] == codename:
            return AptSource(words[0], options.get("signed-by"))
    return None


def machine_source(codename: str = CODENAME, places=SOURCE_FILES) -> AptSource:
    """The URI and keyring of the machine's own `codename` entry (deb822 or one-line)."""
    files: list[Path] = []
    for place in places:
        files += sorted(place.glob("*.sources")) + sorted(place.glob("*.list")) if place.is_dir() else [place]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        found = _from_deb822(text, codename) if f.suffix == ".sources" else _from_one_line(text, codename)
        if found:
            return found
    raise SetupError(f"no apt sources entry for {codename} in /etc/apt")


# ---- fetching ------------------------------------------------------------------------------------

def _apt_options(sources_dir: Path) -> list[str]:
    return ["-o", "Dir::Etc::SourceList=/dev/null",
            "-o", f"Dir::Etc::SourceParts={sources_dir}",
            "-o", f"Dir::State::Lists={APT_DIR / 'lists'}",
            "-o", f"Dir::Cache={APT_DIR / 'cache'}",
            "-o", "Debug::NoLocking=1",          # private folders: nothing else uses them
            "-o", "APT::Get::List-Cleanup=0",
            "-q"]


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 300) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, LC_ALL="C"))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SetupError(f"{argv[0]} failed: {e}") from e
    if done.returncode != 0:
        errors = [line for line in (done.stderr + done.stdout).splitlines() if line.startswith(("E:", "Err:"))]
        reason = (errors or (done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
        raise SetupError(f"{' '.join(argv[:2])} failed: {reason.strip()}")
    return done.stdout


def fetch(source: AptSource) -> Path:
    """Download the backports package into build/apt/debs with the private configuration; its path."""
    sources_dir = APT_DIR / "sources.list.d"
    for d in (sources_dir, APT_DIR / "lists" / "partial", APT_DIR / "cache" / "archives" / "partial",
              APT_DIR / "debs"):
        d.mkdir(parents=True, exist_ok=True)
    (sources_dir / f"{SUITE}.sources").write_text(source.backports_entry())
    opts = _apt_options(sources_dir)
    _run(["apt-get", *opts, "update"])
    debs = APT_DIR / "debs"
    for old in debs.glob(f"{PACKAGE}_*.deb"):
        old.unlink()
    _run(["apt-get", *opts, "download", f"{PACKAGE}/{SUITE}"], cwd=debs)
    found = sorted(debs.glob(f"{PACKAGE}_*.deb"))
    if not found:
        raise SetupError(f"apt-get download {PACKAGE}/{SUITE} left no .deb in {debs}")
    return found[-1]


def extract(deb: Path) -> tuple[str, Path]:
    """`dpkg -x` the package into build/backend/root (replacing an earlier tree); (version, library)."""
    version = _run(["dpkg-deb", "-f", str(deb), "Version"]).strip()
    staging = PRIVATE_BACKEND_DIR / "root.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _run(["dpkg-deb", "-x", str(deb), str(staging)])
    shutil.rmtree(ROOT, ignore_errors=True)
    staging.rename(ROOT)
    libraries = sorted(ROOT.glob(f"usr/lib/*/{LIBRARY}"))
    if not libraries:
        raise SetupError(f"{deb.name} holds no {LIBRARY}")
    return version, libraries[0]


def unresolved(library: Path) -> list[str]:
    """Libraries or symbols of `library` the installed system does not provide (`ldd -r`)."""
    done = subprocess.run(["ldd", "-r", str(library)], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    lines = (done.stdout + done.stderr).splitlines()
    return [line.strip() for line in lines if "not found" in line or "undefined symbol" in line]


def write_manifest(library: Path, api_version: str) -> None:
    manifest = {"file_format_version": "1.0.0",
                "ICD": {"library_path": str(library.resolve()), "api_version": api_version}}
    from tessera.schemas.files import write_atomic

    write_atomic(PRIVATE_MANIFEST, (json.dumps(manifest, indent=4) + "\n").encode())   # exclusive temporary, renamed


def _packaged_api_version() -> str:
    """The api_version of the package's own lavapipe manifest (Mesa writes it at build time)."""
    for m in ROOT.glob("usr/share/vulkan/icd.d/lvp_icd*.json"):
        try:
            return json.loads(m.read_text())["ICD"]["api_version"]
        except (OSError, ValueError, KeyError):
            pass
    return "1.4.0"


# ---- the step ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stamp:
    format: int
    codename: str
    suite: str
    sources_entry: str
    version: str
    library: str

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.format}|{self.codename}|{self.suite}|{self.sources_entry}".encode()).hexdigest()


def _read_stamp() -> Stamp | None:
    try:
        return Stamp(**json.loads(STAMP.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _system_line(reason: str) -> str:
    try:
        where = str(system_manifest())
    except BackendError:
        where = "none installed (apt: mesa-vulkan-drivers)"
    return f"backend: {reason}; using the system lavapipe ({where})"


def setup(refresh: bool = False) -> str:
    """Make sure the private backend is in place; the one line to print."""
    codename = os_codename()
    if codename != CODENAME:
        return _system_line(f"{codename or 'this distribution'} is not Debian 12, whose Mesa is recent enough")
    try:
        source = machine_source()
        entry = source.backports_entry()
        stamp = _read_stamp()
        wanted = Stamp(FORMAT, codename, SUITE, entry, "", "")
        if (not refresh and stamp is not None and stamp.fingerprint() == wanted.fingerprint()
                and Path(stamp.library).is_file() and PRIVATE_MANIFEST.is_file()):
            return f"backend: Mesa {stamp.version} lavapipe (private copy, {PRIVATE_MANIFEST})"
        started = time.monotonic()
        deb = fetch(source)
        version, library = extract(deb)
        missing = unresolved(library)
        if missing:
            PRIVATE_MANIFEST.unlink(missing_ok=True)
            raise SetupError(f"Mesa {version}'s {LIBRARY} does not load here ({'; '.join(missing[:3])})")
        write_manifest(library, _packaged_api_version())
        STAMP.write_text(json.dumps(asdict(Stamp(FORMAT, codename, SUITE, entry, version, str(library))),
                                    indent=2) + "\n")
        return (f"backend: Mesa {version} lavapipe from {SUITE} as a private copy in {ROOT} "
                f"({time.monotonic() - started:.1f} s); manifest {PRIVATE_MANIFEST}")
    except SetupError as e:
        if PRIVATE_MANIFEST.is_file():
            return f"backend: {e}; keeping the private copy already in {PRIVATE_MANIFEST}"
        return _system_line(f"could not get Mesa 25 from {SUITE} ({e})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refresh", action="store_true", help="fetch the backports package again")
    args = parser.parse_args(argv)
    try:
        PRIVATE_BACKEND_DIR.mkdir(parents=True, exist_ok=True)
        line = setup(refresh=args.refresh)
    except Exception as e:  # make setup carries on with the system lavapipe whatever went wrong here
        line = _system_line(f"private backend setup failed ({type(e).__name__}: {e})")
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
