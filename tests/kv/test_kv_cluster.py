"""KV on a 3-node cluster: an R3 bucket, conditional writes, a watcher across a node loss."""

from __future__ import annotations

import pytest

import jetstream_sync as nats_sync
from tests.fixtures.polling import wait_for

pytestmark = pytest.mark.slow


def test_r3_bucket_conditional_writes_and_watch(cluster):
    """R3: typed create/update conflicts (10071/10164); a watcher survives its consumer's node."""
    with nats_sync.connect(cluster.urls, reconnect_time_wait=0.1) as nc:
        ctx = nc.jetstream()
        kv = ctx.create_key_value(bucket="R3KV", replicas=3, history=10)
        try:
            assert kv.status().stream_info.config.num_replicas == 3
            rev = kv.create("k", b"1")
            with pytest.raises(nats_sync.KeyExistsError) as exists:
                kv.create("k", b"2")
            assert exists.value.err_code in (10071, 10164)
            with pytest.raises(nats_sync.KeyWrongLastSequenceError):
                kv.update("k", b"2", rev + 100)
            with kv.watch() as w:
                assert w.next(timeout=10).value == b"1"
                assert w.next(timeout=10) is None
                # the node serving the watcher's consumer goes away
                (host,) = [c.cluster.leader for c in ctx.consumers(kv.stream_name)]
                index = cluster.servers.index(cluster.server_named(host))
                cluster.kill(index)
                revs = [
                    wait_for(lambda i=i: kv.put("k", b"%d" % i), timeout=30,
                             ignore=(nats_sync.NatsError,))
                    for i in range(2, 6)
                ]  # fmt: skip
                # a put retried after its ack was lost is stored twice: the watcher sees both
                seen = [w.next(timeout=30)]
                while seen[-1].revision < revs[-1]:
                    seen.append(w.next(timeout=30))
                assert set(revs) <= {e.revision for e in seen}
                assert [e.revision for e in seen] == sorted({e.revision for e in seen})
                assert list(dict.fromkeys(e.value for e in seen)) == [b"2", b"3", b"4", b"5"]
                cluster.restart(index)
        finally:
            ctx.delete_key_value("R3KV")


def test_r3_watch_marker_follows_every_initial_entry(cluster):
    """R3: watches started right after a write list every key before None, each time.

    The watcher's R1 consumer may sit on a replica that has not stored the newest
    write yet; the marker must still come after it.
    """
    with nats_sync.connect(cluster.urls) as nc:
        ctx = nc.jetstream()
        kv = ctx.create_key_value(bucket="R3MARK", replicas=3)
        try:
            keys = []
            for i in range(30):
                keys.append(f"k{i}")
                kv.put(keys[-1], b"%d" % i)
                with kv.watch() as w:
                    seen = []
                    while (entry := w.next(timeout=10)) is not None:
                        seen.append(entry.key)
                assert seen == keys, f"watch {i}: {seen} before the marker"
        finally:
            ctx.delete_key_value("R3MARK")


def test_r3_listings_ride_stream_leader_elections(cluster):
    """keys() and history() right after a stream leader step-down answer in full, not 10008."""
    with nats_sync.connect(cluster.urls) as nc:
        ctx = nc.jetstream(timeout=10)
        kv = ctx.create_key_value(bucket="R3ELECT", replicas=3, history=5)
        try:
            for i in range(3):
                kv.put(f"k{i}", b"v")
            step_down = f"$JS.API.STREAM.LEADER.STEPDOWN.{kv.stream_name}"
            for _ in range(6):
                wait_for(lambda: kv.status().stream_info.cluster.leader, ignore=nats_sync.NatsError)
                nc.request(step_down, b"", timeout=10)
                assert kv.keys() == ["k0", "k1", "k2"]
                assert [e.key for e in kv.history("k1")] == ["k1"]
        finally:
            ctx.delete_key_value("R3ELECT")


def test_r3_reads_answer_with_a_frozen_replica(cluster):
    """Direct gets (kv.get, a stream's direct_get) go to any replica; one that is frozen
    (SIGSTOP) holds the request it got, and the read is asked again of another."""
    with nats_sync.connect(cluster.urls) as admin:
        ctx = admin.jetstream(timeout=10)
        kv = ctx.create_key_value(bucket="R3FROZEN", replicas=3)
        try:
            for i in range(4):
                kv.put(f"k{i}", b"v%d" % i)
            stream = ctx.stream(kv.stream_name)
            leader = wait_for(lambda: stream.info().cluster.leader, ignore=nats_sync.NatsError)
            victim = cluster.server_named(leader)
            others = [s.url for s in cluster.servers if s is not victim]
            with nats_sync.connect(others) as nc:
                reader = nc.jetstream(timeout=30)  # a loaded cluster may elect for 10 s and more
                bucket = reader.key_value("R3FROZEN")
                direct = reader.stream_no_info(kv.stream_name)
                with victim.freeze(timeout=120):
                    for i in range(4):  # each read may go to the frozen replica
                        assert bucket.get(f"k{i}").value == b"v%d" % i
                        got = direct.direct_get_last_for_subject(f"$KV.R3FROZEN.k{i}")
                        assert got.data == b"v%d" % i
        finally:
            cluster.wait_formed()  # the thawed server may have led the cluster: elections follow
            wait_for(lambda: _deleted(ctx, "R3FROZEN"), timeout=30, ignore=nats_sync.NatsError)


def _deleted(ctx, bucket):
    """Delete ``bucket``; True once it is gone (a try that timed out may have deleted it)."""
    try:
        return ctx.delete_key_value(bucket)
    except nats_sync.BucketNotFoundError:
        return True
