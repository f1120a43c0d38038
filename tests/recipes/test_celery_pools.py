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


def _sample(cls: type[BaseException]) -> BaseException:
    """An instance of the public error ``cls``, its constructor's arguments all set."""
    samples: dict[str, tuple[object, ...]] = {
        "ServerError": ("bad thing",),
        "NoRespondersError": ("no responders on 'a'", "a"),
        "LimitExceededError": ("subject", 9000, 4096, "the control line"),
        "SlowConsumerError": ("orders.*", 7),
        "ServerSlowConsumerError": ("Slow Consumer",),
        "PullStatusError": (409, "Consumer Deleted"),
        "PriorityGroupError": ("unknown group", "jobs", 400),
        "KeyDeletedError": ("key 'k' was deleted", None),
        "ObjectReplacedError": ("object was replaced", 12),
        "CounterNotFoundError": ("counts.a",),
        "NotAScheduleError": ("jobs.a", 5),
        "FastBatchError": ("batch failed", 3),
        "FastBatchGapError": ("gap", 9, 4),
        "FastBatchMessageError": ("refused", 2, None),
        "RowPublishError": ("row 3 failed", 3, "rows.a"),
    }
    if issubclass(cls, jetstream_sync.errors.APIError):
        return cls(404, 10059, "stream not found", stream="ORDERS", seq=4)
    for klass in cls.__mro__:
        if klass.__name__ in samples:
            return cls(*samples[klass.__name__])
    return cls("what went wrong")


def test_task_errors_come_back_from_json_results():
    """Every public error a task raises comes back from Celery's JSON result backend whole."""
    from celery import Celery

    backend = Celery("errors", broker="memory://", backend="cache+memory://").backend
    errors = jetstream_sync.errors
    classes = [
        cls for name in dir(errors)
        if isinstance(cls := getattr(errors, name), type) and issubclass(cls, BaseException)
        and cls.__module__ == errors.__name__
    ]  # fmt: skip
    for cls in classes:
        exc = _sample(cls)
        stored = backend.decode(backend.encode(backend.prepare_exception(exc, "json")))
        back = backend.exception_to_python(stored)
        assert type(back) is cls and str(back) == str(exc), (cls, str(back), str(exc))
        assert vars(back) == vars(exc), cls
