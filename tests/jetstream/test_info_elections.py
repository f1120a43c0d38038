"""stream.info() and consumer.info() right after a kill -9 of the leader's node.

A request the stream (or consumer) gets while its replicas still wait for the dead
leader is dropped, not answered; the new leader answers 4 to 20 s after the kill.
An info call with a timeout longer than that answers once the new leader does.
"""

from __future__ import annotations

import uuid

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.mark.parametrize("of", ["stream", "consumer"])
def test_info_answers_once_a_killed_leader_is_replaced(cluster, of):
    """info(timeout=60) sent at once after the leader's kill returns the new leader."""
    name = "IE" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls) as admin:
        js = admin.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            consumer = stream.create_consumer(durable_name="c", num_replicas=3)
            target = stream if of == "stream" else consumer
            leader = wait_for(lambda: target.info().cluster.leader, ignore=jetstream_sync.NatsError)
            victim = cluster.server_named(leader)
            index = cluster.servers.index(victim)
            others = [s.url for s in cluster.servers if s is not victim]
            with jetstream_sync.connect(others) as nc:
                ctx = nc.jetstream()
                handle = ctx.stream(name) if of == "stream" else ctx.consumer(name, "c")
                cluster.kill(index)
                info = handle.info(timeout=60)
            assert info.cluster.leader not in (None, leader)
            cluster.restart(index)
        finally:
            wait_for(lambda: js.delete_stream(name), timeout=30, ignore=jetstream_sync.NatsError)
