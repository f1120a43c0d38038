"""Continuous pulling while the consumer has no leader: warnings pace themselves, no spin.

When two of three servers are down, an R3 consumer has no leader: every pull
is answered 503 (no responders) and the info call that tells a gone
consumer from an unreachable one times out. ``consume()`` must report that
at the pace of its retries, not flood ``error_handler`` in a busy loop.
"""

from __future__ import annotations

import collections
import threading
import uuid

import pytest

import jetstream_sync
from jetstream_sync.errors import NoHeartbeatError, NoRespondersError
from tests.fixtures.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(180)]


def test_consume_without_consumer_leader_does_not_spin(cluster):
    """With no consumer leader, missed-heartbeat warnings come at most about once per pull."""
    name = "QL" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls[0], no_randomize=True) as nc:
        js = nc.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        consumer = stream.create_consumer(durable_name="q", num_replicas=3)
        wait_for(lambda: consumer.info().cluster.leader, ignore=jetstream_sync.NatsError)
        warnings: collections.Counter[type] = collections.Counter()
        lock = threading.Lock()

        def note(exc: BaseException) -> None:
            """Count a warning by type."""
            with lock:
                warnings[type(exc)] += 1

        ctx = consumer.consume(lambda msg: None, error_handler=note, expires=1.0, heartbeat=0.5)
        try:
            cluster.kill(1)
            cluster.kill(2)
            wait_for(lambda: warnings[NoRespondersError] >= 3, timeout=60)
            with lock:
                counts = dict(warnings)
        finally:
            ctx.stop()
            cluster.heal()
            js.delete_stream(name)
    assert counts.get(NoHeartbeatError, 0) <= counts[NoRespondersError] + 2, counts
