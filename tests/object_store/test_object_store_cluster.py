"""Object Store on a 3-node cluster: a put failed by the loss of its stream's leader."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import pytest

import jetstream_sync as nats_sync
from tests.fixtures.cluster import NatsCluster
from tests.fixtures.polling import wait_for

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


class _KillsTheLeader:
    """A file that, once ``stored()`` says chunks are stored, kills one node and goes on
    for ``more`` chunks after the client reconnected: the put's own publishes fail."""

    def __init__(
        self,
        cluster: NatsCluster,
        index: int,
        stored: Callable[[], object],
        reconnected: threading.Event,
        more: int,
    ) -> None:
        self._cluster, self._index, self._stored = cluster, index, stored
        self._reconnected, self._more = reconnected, more
        self._left: int | None = None

    def read(self, size: int) -> bytes:
        if self._left is None and self._stored():
            self._cluster.kill(self._index)
            assert self._reconnected.wait(10)
            self._left = self._more
        if self._left is not None:
            if self._left == 0:
                return b""
            self._left -= 1
        return b"x" * size


def test_put_cut_by_a_leader_kill_leaves_no_chunks(cluster):
    """A put whose chunks were cut by a kill -9 of the stream's leader raises and leaves
    no chunks, though the stream takes longer to elect a leader than the put's timeout.

    The new leader answers the purge 4 to 20 s after the kill (the election timeout of
    the server's Raft; longer when the node led the meta group too), longer than the
    2 s the put waits for each ack or API reply.
    """
    reconnected = threading.Event()
    with nats_sync.connect(cluster.urls) as admin:
        ctx = admin.jetstream(timeout=30)
        stream = ctx.stream(ctx.create_object_store("R3KILL", replicas=3).stream_name)
        try:
            leader = cluster.server_named(stream.info().cluster.leader)
            index = cluster.servers.index(leader)
            urls = [leader.url] + [s.url for s in cluster.servers if s is not leader]
            with nats_sync.connect(
                urls, no_randomize=True, reconnect_time_wait=0.1, reconnected_cb=reconnected.set
            ) as nc:
                store = nc.jetstream(timeout=2).object_store("R3KILL")

                def stored() -> bool:
                    """Whether the leader acked a chunk (so one is stored on every replica)."""
                    return stream.info().state.messages > 0

                source = _KillsTheLeader(cluster, index, stored, reconnected, more=8)
                with pytest.raises(nats_sync.NatsError):
                    store.put("cut", source, chunk_size=CHUNK)
            # a request the stream gets while it has no leader is dropped: ask again
            state = wait_for(
                lambda: stream.info(subjects_filter="$O.R3KILL.C.>", timeout=2).state,
                timeout=60,
                ignore=nats_sync.NatsError,
            )
            assert state.subjects == {}
            assert state.messages == 0
            cluster.restart(index)
        finally:
            ctx.delete_object_store("R3KILL")


class _StepsDownTheLeader:
    """A file of ``chunks`` chunks that asks the stream's leader to step down before chunk
    ``at``: the chunks in flight and those sent next find no leader for a moment."""

    def __init__(self, admin: nats_sync.Client, stream: str, chunks: int, at: int) -> None:
        self._admin, self._stream = admin, stream
        self._chunks, self._at = chunks, at
        self.reads = 0

    def read(self, size: int) -> bytes:
        if self.reads == self._chunks:
            return b""
        self.reads += 1
        if self.reads == self._at:
            # a stream still electing its last leader does not answer: ask again
            subject = f"$JS.API.STREAM.LEADER.STEPDOWN.{self._stream}"
            wait_for(
                lambda: self._admin.request(subject, b"", timeout=2), ignore=nats_sync.NatsError
            )
        return self.reads.to_bytes(4, "big") * (size // 4)


def test_puts_ride_leader_stepdowns_with_their_chunks_in_order(cluster):
    """Puts whose chunks meet a stream leader step-down (as in a rolling restart) store
    their objects, every chunk once and in order, and leave no other chunk behind.

    A chunk sent while no replica leads the stream gets no responders (or no ack, dropped
    by the old leader): it and the chunks after it are sent again, in order, once those
    stored out of order are deleted.
    """
    expected = b"".join(i.to_bytes(4, "big") * 1024 for i in range(1, 41))
    with nats_sync.connect(cluster.urls) as admin:
        ctx = admin.jetstream(timeout=20)
        store = ctx.create_object_store("R3STEP", replicas=3)
        try:
            for n in range(3):
                source = _StepsDownTheLeader(admin, store.stream_name, chunks=40, at=20)
                info = store.put(f"stepped-{n}", source, chunk_size=4096, timeout=3)
                assert (info.size, info.chunks) == (len(expected), 40)
                # a direct get may be answered by a replica yet to apply the meta
                get = partial(store.get, info.name, timeout=10)
                assert wait_for(get, timeout=15, ignore=nats_sync.ObjectNotFoundError) == expected
                chunks = f"$O.R3STEP.C.{info.nuid}"
                state = ctx.stream(store.stream_name).info(subjects_filter=chunks).state
                assert state.subjects == {chunks: 40}
        finally:
            ctx.delete_object_store("R3STEP")


def test_a_rename_rides_a_leader_stepdown_before_the_old_name_is_purged(cluster):
    """A rename whose stream leader steps down between the new meta and the purge of
    the old name's: the purge is sent again until a leader answers, so one name is left
    (two live names would share chunks a delete of either purges)."""
    with nats_sync.connect(cluster.urls) as admin:
        ctx = admin.jetstream(timeout=20)
        store = ctx.create_object_store("R3RENAME", replicas=3)
        try:
            store.put("old", b"payload")
            publish_meta = store._publish_meta
            subject = f"$JS.API.STREAM.LEADER.STEPDOWN.{store.stream_name}"

            def publish_then_step_down(*args, **kwargs):
                info = publish_meta(*args, **kwargs)
                wait_for(lambda: admin.request(subject, b"", timeout=2), ignore=nats_sync.NatsError)
                return info

            store._publish_meta = publish_then_step_down
            store.update_meta("old", nats_sync.ObjectMeta(name="new"), timeout=2)
            del store._publish_meta
            listed = wait_for(lambda: [o.name for o in store.list(timeout=10)], timeout=15)
            assert listed == ["new"]
            with pytest.raises(nats_sync.ObjectNotFoundError):
                store.get_info("old", timeout=10)
        finally:
            ctx.delete_object_store("R3RENAME")
