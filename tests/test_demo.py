"""The README's main job (examples/demo.py) runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_demo(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    env.update(env_extra)
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_against_a_given_server(nats_server):
    """With NATS_URL set, the demo uses that server and finishes the pipeline."""
    out = _run_demo({"NATS_URL": nats_server.url})
    assert f"connected to {nats_server.url}" in out
    assert "consumed and acked 50,000 orders" in out
    assert out.rstrip().endswith("demo finished")


def test_demo_starts_its_own_server():
    """Without NATS_URL, the demo starts and stops an embedded nats-server."""
    out = _run_demo({})
    assert "started an embedded nats-server" in out
    assert out.rstrip().endswith("demo finished")
