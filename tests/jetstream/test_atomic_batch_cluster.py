"""Atomic batches on an R3 stream: the first message's answer comes from the stream leader."""

from __future__ import annotations

import pytest

import jetstream_sync as nats_sync

pytestmark = pytest.mark.slow


def test_atomic_batches_on_an_r3_stream_store_whole_batches(cluster):
    """Each batch's first message is answered by the R3 stream before the rest is sent,
    and every batch is stored whole; a batch to an R3 stream without ``allow_atomic``
    is refused at its first message and stores nothing."""
    with nats_sync.connect(cluster.urls) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="ATOMR3", subjects=["atomr3.>"], num_replicas=3, allow_atomic=True)
        ctx.create_stream(name="PLAINR3", subjects=["plainr3.>"], num_replicas=3)
        try:
            batch = [("atomr3.a", b"1"), ("atomr3.b", b"2"), ("atomr3.c", b"3")]
            for _ in range(20):
                ack = ctx.publish_batch(batch)
                assert ack.batch_size == 3
            assert ctx.stream("ATOMR3").info().state.messages == 60
            with pytest.raises(nats_sync.AtomicPublishDisabledError):
                ctx.publish_batch([("plainr3.a", b"1"), ("plainr3.b", b"2")])
            assert ctx.stream("PLAINR3").info().state.messages == 0
        finally:
            ctx.delete_stream("ATOMR3")
            ctx.delete_stream("PLAINR3")
