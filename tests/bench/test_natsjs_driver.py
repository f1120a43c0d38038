"""The nats.js peer of the benchmark suite: its rows, or why it cannot give them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

ROOT = Path(__file__).resolve().parents[2]


def _driver_rows(server: NatsServer, scenario: str, env: dict[str, str]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.driver_natsjs", "--port", str(server.port),
         "--scenario", scenario, "--n", "200"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_scenario_it_does_not_run_is_reported_unavailable(nats_server: NatsServer) -> None:
    """S1 is not one of nats.js's scenarios: one "unavailable" row, naming those it runs."""
    (row,) = _driver_rows(nats_server, "S1", {})
    assert row["client"] == "nats.js" and row["scenario"] == "S1"
    assert row["error"] == "unavailable: the nats.js peer runs FASTB, S5, S5x only"


def test_without_its_modules_the_peer_says_what_is_missing(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """A directory without nats.js's node_modules gives an "unavailable" row, not a crash."""
    (row,) = _driver_rows(nats_server, "S5", {"NATS_JS_DIR": str(tmp_path)})
    assert row["scenario"] == "S5"
    missing = "node" if shutil.which("node") is None else "nats.js modules"
    assert row["error"].startswith(f"unavailable: {missing}"), row


def _natsjs_modules() -> str:
    from benchmarks.driver_natsjs import modules_dir

    where = modules_dir()
    if shutil.which("node") is None or where is None:
        pytest.skip("needs node and nats.js's modules (NATS_JS_DIR or benchmarks/js)")
    return str(where)


def test_s5_measures_requests_and_the_three_api_calls(nats_server: NatsServer) -> None:
    """S5 through nats.js: the request/reply row and S5info, S5cinfo, S5ccreate, each
    with its latency percentiles, as the Python drivers print them."""
    rows = _driver_rows(nats_server, "S5", {"NATS_JS_DIR": _natsjs_modules()})
    assert [r["scenario"] for r in rows] == ["S5", "S5info", "S5cinfo", "S5ccreate"]
    for row in rows:
        assert "error" not in row, row
        assert row["client"] == "nats.js" and row["n"] == (200 if row["scenario"] == "S5" else 40)
        assert 0 < row["p50_us"] <= row["p99_us"], row


def test_s5x_asks_a_responder_of_its_own_in_another_process(nats_server: NatsServer) -> None:
    """S5x through nats.js: the requests go to a node responder that the driver started
    and stopped: no connection of either is left on the server."""
    (row,) = _driver_rows(nats_server, "S5x", {"NATS_JS_DIR": _natsjs_modules()})
    assert row["scenario"] == "S5x" and row["n"] == 200 and row["p50_us"] > 0, row
    wait_for(lambda: nats_server.monitor("connz")["num_connections"] == 0, timeout=10)
