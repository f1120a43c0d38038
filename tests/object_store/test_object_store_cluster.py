"""Object Store on a 3-node cluster: a put failed by the loss of its stream's leader."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync as nats_sync
from tests.fixtures.cluster import NatsCluster

pytestmark = pytest.mark.slow

CHUNK = 64 << 10


class _FailsWithTheLeader:
    """A file whose read after ``after`` chunks kills one node and, once the client is
    disconnected, fails (as a disk or a network share may)."""

    def __init__(
        self, cluster: NatsCluster, index: int, disconnected: threading.Event, after: int
    ) -> None:
        self._cluster, self._index, self._after = cluster, index, after
        self._disconnected = disconnected
        self.reads = 0

    def read(self, size: int) -> bytes:
        self.reads += 1
        if self.reads <= self._after:
            return b"x" * size
        self._cluster.kill(self._index)
        assert self._disconnected.wait(10)
        raise OSError("the source failed")


def test_put_failed_by_a_leader_loss_leaves_no_chunks(cluster):
    """The chunks of a put that failed as the stream's leader died are purged.

    The purge goes out while the stream elects a new leader, when no one answers
    it; it is sent again until one does (within the put's timeout), not given up,
    leaving chunks no meta names.
    """
    disconnected = threading.Event()
    with nats_sync.connect(cluster.urls) as admin:
        ctx = admin.jetstream()
        stream = ctx.create_object_store("R3PUT", replicas=3).stream_name
        try:
            leader = cluster.server_named(ctx.stream(stream).info().cluster.leader)
            index = cluster.servers.index(leader)
            urls = [leader.url] + [s.url for s in cluster.servers if s is not leader]
            with nats_sync.connect(
                urls, no_randomize=True, reconnect_time_wait=0.1, disconnected_cb=disconnected.set
            ) as nc:
                store = nc.jetstream().object_store("R3PUT")
                source = _FailsWithTheLeader(cluster, index, disconnected, after=8)
                with pytest.raises(OSError, match="the source failed"):
                    store.put("cut", source, chunk_size=CHUNK, timeout=20)
                state = ctx.stream(stream).info(subjects_filter="$O.R3PUT.C.>", timeout=20).state
                assert state.subjects == {}
                assert state.messages == 0
            cluster.restart(index)
        finally:
            ctx.delete_object_store("R3PUT", timeout=20)
