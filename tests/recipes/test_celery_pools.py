"""Celery workers whose tasks publish to JetStream (tests/fixtures/celery_app.py), with the
prefork, threads and gevent pools; kombu's filesystem transport is the broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for

pytest.importorskip("celery")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TASKS = 40
POOLS = {"prefork": "threads", "threads": "threads", "gevent": "cooperative"}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("pool", list(POOLS))
def test_tasks_publish(pool, nats_server, tmp_path):
    """40 tasks over 4 workers: every order stored once, published in the pool's wait mode."""
    if pool == "gevent":
        pytest.importorskip("gevent")
    sys.path.insert(0, str(FIXTURES))
    try:
        from celery_app import make_app
    finally:
        sys.path.remove(str(FIXTURES))
    broker = tmp_path / "broker"
    broker.mkdir()
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="TASKS", subjects=["tasks.orders"])
        env = {
            **os.environ, "NATS_URL": nats_server.url, "CELERY_BROKER_DIR": str(broker),
            "PYTHONPATH": f"{FIXTURES}:{FIXTURES.parent.parent}",
        }  # fmt: skip
        log = tmp_path / "worker.log"
        with open(log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool", pool,
                 "--concurrency", "4", "--loglevel", "WARNING", "--without-heartbeat",
                 "--without-mingle", "--without-gossip"],
                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            sender = make_app(str(broker))
            for i in range(TASKS):
                sender.send_task("publish_order", args=[i])
            stream = js.stream("TASKS")
            wait_for(
                lambda: stream.info().state.messages == TASKS,
                timeout=120, interval=0.1,
                message=lambda: f"{stream.info().state}\n{log.read_text()}",
            )  # fmt: skip
            bodies = [json.loads(stream.get_msg(seq).data) for seq in range(1, TASKS + 1)]
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    assert sorted(b["i"] for b in bodies) == list(range(TASKS))
    assert {b["mode"] for b in bodies} == {POOLS[pool]}
    pids = {b["pid"] for b in bodies}
    if pool == "prefork":  # the forked pool processes each connected themselves
        assert worker.pid not in pids
    else:
        assert pids == {worker.pid}
