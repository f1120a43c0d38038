"""A 200 MiB object goes from a file to the store and back to a file in bounded memory."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SIZE = 200 * 1024 * 1024
LIMIT = 64 * 1024 * 1024

# Runs in a fresh interpreter so the peak RSS it reports is this transfer's own.
_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import jetstream_sync

    url, src, dst = sys.argv[1:4]
    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    with jetstream_sync.connect(url) as nc:
        obs = nc.jetstream(timeout=30.0).create_object_store(bucket="BIG")
        obs.put("warm-up", b"x" * 300_000)
        obs.get("warm-up")
        before = peak()
        with open(src, "rb") as f:
            info = obs.put("big", f)
        with open(dst, "wb") as f:
            obs.get_into("big", f)
        after = peak()
    print(json.dumps({"before": before, "after": after, "size": info.size}))
    """
)


def _sha256(path: Path) -> bytes:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.digest()


def test_200_mib_object_round_trip_in_bounded_memory(nats_server, tmp_path: Path):
    """put from a file and get_into a file of 200 MiB raise the peak RSS by under 64 MB."""
    src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
    with src.open("wb") as f:
        block = os.urandom(1 << 20)
        for i in range(SIZE >> 20):
            f.write(block[i:] + block[:i])  # every MiB differs
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, nats_server.url, str(src), str(dst)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["size"] == SIZE
    assert report["after"] - report["before"] < LIMIT, report
    assert dst.stat().st_size == SIZE and _sha256(dst) == _sha256(src)
