"""A pull consumer while it has no leader (two of three servers down).

Every pull and every ``ack_sync()`` is then answered 503 (no responders) and
the info call that tells a gone consumer from an unreachable one times out.
``consume()`` must report that at the pace of its retries, not flood
``error_handler`` in a busy loop; an ``ack_sync()`` nobody received may be
sent again once a leader is back.
"""

from __future__ import annotations

import collections
import threading
import uuid

import pytest

import jetstream_sync
from jetstream_sync.errors import NoHeartbeatError, NoRespondersError, TimeoutError
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


def test_ack_sync_nobody_received_can_be_sent_again(cluster):
    """An ack_sync() answered 503 (no consumer leader) leaves the message unacked; a retry acks."""
    name = "QA" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls) as admin:
        js = admin.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            js.publish(f"{name}.x", b"job")
            consumer = stream.create_consumer(durable_name="q", num_replicas=3, ack_wait=60)
            leader = wait_for(
                lambda: consumer.info().cluster.leader, ignore=jetstream_sync.NatsError
            )
            names = [server.server_name for server in cluster.servers]
            survivor = next(i for i, n in enumerate(names) if n != leader)
            with jetstream_sync.connect(cluster.urls[survivor], no_randomize=True) as nc:
                (msg,) = nc.jetstream().consumer(name, "q").fetch(1, timeout=5)
                for i in range(len(names)):
                    if i != survivor:
                        cluster.kill(i)
                with pytest.raises(NoRespondersError):
                    msg.ack_sync(timeout=5)
                assert not msg.is_acked
                cluster.heal()

                def acked() -> bool:
                    """Send the ack again; True once the server confirmed it."""
                    try:
                        msg.ack_sync(timeout=2)
                    except (NoRespondersError, TimeoutError):
                        return False
                    return True

                wait_for(acked, timeout=30)
            assert consumer.info().num_ack_pending == 0
        finally:
            cluster.heal()
            js.delete_stream(name)
