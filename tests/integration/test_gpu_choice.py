"""`tessera run --gpu NAME` end to end: the chosen real device names itself everywhere a user looks:
the emulated device (the layer's DEVICE metadata), the merged trace's hardware queues and the
summary. The expected names are read from the device's own file, not typed here."""
from __future__ import annotations

import json
import re

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.merge import MERGED_NAME
from tessera.icd.profiles import DEVICES, PROFILES
from tessera.schemas.perfetto import QUEUE_OF
from tessera.schemas.perfetto import read_packets

TESSERA = REPO / ".venv" / "bin" / "tessera"


@pytest.mark.parametrize("key", ["mali-g925", "mali-g715", "mali-g77"])
def test_the_chosen_device_is_named_in_the_trace_and_the_summary(shims, tmp_path, key):
    (profile,) = json.loads((DEVICES / f"{key}.json").read_text())["profiles"].values()
    named = f"{PROFILES[key].device_name}: {profile['label']}"
    session = tmp_path / "s"
    out = run([TESSERA, "run", "--gpu", key, "--out", session, "--", PYTHON, REPO / "examples" / "compute_collatz.py"], None)
    assert out.returncode == 0, out.stderr
    queues = {spec.name: spec.description for p in read_packets(session / MERGED_NAME) if p.HasField("interned_data")
              for spec in p.interned_data.gpu_specifications if spec.description}
    assert queues and all(d == f"{q}{QUEUE_OF}{named}" for q, d in queues.items()), queues
    (gpu,) = [m[1] for line in out.stdout.splitlines() if (m := re.match(r"GPU {2,}(\S.*)$", line))]
    assert gpu == named
    from tessera.hostd.advice.gpu import session_device
    assert session_device(session) == PROFILES[key].device_name      # the layer's DEVICE metadata


def test_a_users_profile_is_reported_and_named(shims, tmp_path):
    """--gpu-profile: a device export the user brings (here a copy of a shipped one under another
    name) is what the driver reports and names; --gpu's GPU (the default) gives the device name."""
    mine = tmp_path / "my_phone.json"
    mine.write_bytes((DEVICES / "mali-g925.json").read_bytes())
    (profile,) = json.loads(mine.read_text())["profiles"].values()
    session = tmp_path / "s"
    out = run([TESSERA, "run", "--gpu-profile", mine, "--out", session, "--", PYTHON,
               REPO / "examples" / "compute_collatz.py"], None)
    assert out.returncode == 0, out.stderr
    named = f"{PROFILES['mali-g720'].device_name}: {profile['label']}"
    assert any(re.match(rf"GPU {{2,}}{re.escape(named)}$", line) for line in out.stdout.splitlines()), out.stdout
