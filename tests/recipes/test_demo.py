"""examples/demo.py (``make demo-orders``) runs end to end from the installed package."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.examples import run_example


def _run_demo(tmp_path: Path, env: dict[str, str]) -> str:
    done = run_example("demo.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_against_a_given_server(nats_server, tmp_path: Path):
    """With NATS_URL set, the demo uses that server and finishes the pipeline."""
    out = _run_demo(tmp_path, {"NATS_URL": nats_server.url})
    assert f"connected to {nats_server.url}" in out
    assert "consumed and acked 50,000 orders" in out
    assert out.rstrip().endswith("demo finished")


def test_demo_starts_its_own_server_and_its_summary_is_true(tmp_path: Path):
    """Without NATS_URL it starts a dev server; the summary shows every order acked."""
    out = _run_demo(tmp_path, {})
    assert "started an embedded nats-server" in out
    assert "consumed and acked 50,000 orders" in out
    assert "consumer billing: 0 unacked, 0 pending" in out
    assert out.rstrip().endswith("demo finished")
