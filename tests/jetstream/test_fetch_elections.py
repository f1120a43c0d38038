"""fetch() while the consumer's leader is re-elected: messages, ``[]`` or TimeoutError only.

docs/reliability.md promises these three outcomes of ``fetch()`` through
faults. Here the consumer leader of an R3 consumer on the 3-node cluster is
stepped down again and again ($JS.API.CONSUMER.LEADER.STEPDOWN) while another
thread fetches and acks without pause.
"""

from __future__ import annotations

import threading
import time
import types
import uuid

import pytest

import jetstream_sync
from jetstream_sync.jetstream import consumer as consumer_module
from tests.fixtures.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(240)]

STEP_DOWNS = 8
MESSAGES = 400


def test_fetch_rides_consumer_leader_elections(cluster):
    """Every fetch returns messages or []; every message is received despite the elections."""
    name = "EL" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            for i in range(MESSAGES):
                js.publish_async(f"{name}.x", b"%d" % i)
            js.publish_async_completed(30)
            consumer = stream.create_consumer(durable_name="el", num_replicas=3, ack_wait=5.0)
            wait_for(lambda: consumer.info().cluster.leader, ignore=Exception)
            errors: list[BaseException] = []
            seen: set[int] = set()
            stop = threading.Event()

            def fetch_loop() -> None:
                """Fetch small batches until told to stop; keep what fetch raised."""
                while not stop.is_set():
                    try:
                        msgs = consumer.fetch(2, timeout=1.0)
                    except Exception as exc:  # noqa: BLE001 - the test lists them
                        errors.append(exc)
                        continue
                    for msg in msgs:
                        seen.add(msg.metadata.sequence.stream)
                        msg.ack()

            worker = threading.Thread(target=fetch_loop, name="fetcher")
            worker.start()
            try:
                for _ in range(STEP_DOWNS):
                    leader = wait_for(lambda: consumer.info().cluster.leader, ignore=Exception)
                    nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{name}.el", b"", timeout=5)
                    wait_for(
                        lambda old=leader: consumer.info().cluster.leader not in (None, old),
                        timeout=30,
                        ignore=Exception,
                    )
                wait_for(lambda: len(seen) == MESSAGES or errors, timeout=120)
            finally:
                stop.set()
                worker.join(30)
            assert errors == []
            assert seen == set(range(1, MESSAGES + 1))
        finally:
            js.delete_stream(name)


def test_a_fetch_whose_back_off_outlives_its_timeout_returns_empty(cluster, monkeypatch):
    """A pull dropped by a consumer leader stepping down is asked again after a back-off;
    when that back-off (a busy machine) ends past the fetch's deadline, fetch() returns []
    instead of sending a pull with no time left (a ValueError from deep inside)."""
    name = "EB" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            consumer = stream.create_consumer(durable_name="eb", num_replicas=3)
            wait_for(lambda: consumer.info().cluster.leader, ignore=Exception)
            backed_off = threading.Event()

            def stalled(seconds: float) -> None:  # the back-off, on a machine that stalls
                time.sleep(seconds + TIMEOUT)
                backed_off.set()

            monkeypatch.setattr(consumer_module, "time", types.SimpleNamespace(sleep=stalled))
            got: list[object] = []
            fetcher = threading.Thread(
                target=lambda: got.append(_outcome(lambda: consumer.fetch(1, timeout=TIMEOUT)))
            )
            fetcher.start()
            wait_for(lambda: consumer.info().num_waiting == 1, ignore=Exception)
            nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{name}.eb", b"", timeout=5)
            fetcher.join(4 * TIMEOUT)
            assert backed_off.is_set(), "the pull was not dropped by the step-down"
            assert got == [[]]
        finally:
            js.delete_stream(name)


TIMEOUT = 2.0


def _outcome(call):
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the test compares what came out
        return exc
