"""ack_batch(msgs): every +ACK of a batch in one write, checked before anything is sent."""

from __future__ import annotations

import asyncio

import nats
import pytest

import jetstream_sync
from jetstream_sync import MsgAlreadyAckedError, NotJetStreamMsgError, ack_batch
from jetstream_sync.msg import Msg
from tests.fixtures.polling import wait_for
from tests.fixtures.server import stopped
from tests.fixtures.stall import fill_past_high_water


def _fill(js, stream, n: int, token: str = "m") -> None:
    for i in range(n):
        js.publish(f"{stream.name}.{token}", b"%d" % i)


def _ack_pending(consumer) -> int:
    return consumer.info().num_ack_pending


def _count_writes(monkeypatch, client) -> list[int]:
    """Record the count of every acknowledgement write ``client`` makes."""
    writes: list[int] = []
    send = client.send_acks

    def counting(frames: bytes, count: int, timeout: float | None = None) -> None:
        writes.append(count)
        send(frames, count, timeout)

    monkeypatch.setattr(client, "send_acks", counting)
    return writes


def test_a_batch_is_acked_once_in_one_write(nc, js, stream, monkeypatch):
    """A fetched batch is acked with one write: nothing pending, nothing redelivered."""
    _fill(js, stream, 50)
    consumer = stream.create_consumer(durable_name="whole", ack_wait=2)
    msgs = consumer.fetch(50, timeout=2)
    assert len(msgs) == 50 and _ack_pending(consumer) == 50
    writes = _count_writes(monkeypatch, nc)
    ack_batch(msgs)
    assert writes == [50]
    assert all(m.is_acked for m in msgs)
    nc.flush()
    wait_for(lambda: _ack_pending(consumer) == 0, message="acks not applied")
    info = consumer.info()
    assert info.num_pending == 0 and info.num_redelivered == 0
    assert consumer.fetch(1, timeout=2.5) == []  # past ack_wait: nothing comes back


def test_an_acked_message_refuses_the_batch_and_nothing_is_sent(nc, js, stream, monkeypatch):
    """One message already acked: MsgAlreadyAckedError, no write, none of the others marked."""
    _fill(js, stream, 5)
    consumer = stream.create_consumer(durable_name="mixed", ack_wait=30)
    msgs = consumer.fetch(5, timeout=2)
    msgs[2].ack()
    nc.flush()
    wait_for(lambda: _ack_pending(consumer) == 4)
    writes = _count_writes(monkeypatch, nc)
    with pytest.raises(MsgAlreadyAckedError):
        ack_batch(msgs)
    assert writes == []
    assert [m.is_acked for m in msgs] == [False, False, True, False, False]
    nc.flush()
    assert _ack_pending(consumer) == 4
    ack_batch(msgs[:2] + msgs[3:])
    nc.flush()
    wait_for(lambda: _ack_pending(consumer) == 0)


def test_a_message_listed_twice_refuses_the_batch(nc, js, stream):
    """The same message twice in one batch is refused as a second ack would be; none marked."""
    _fill(js, stream, 2)
    a, b = stream.create_consumer().fetch(2, timeout=2)
    with pytest.raises(MsgAlreadyAckedError):
        ack_batch([a, b, a])
    assert not a.is_acked and not b.is_acked


def test_messages_not_from_jetstream_are_refused(nc, js, stream, monkeypatch):
    """A core message (reply or not) or one made by hand: NotJetStreamMsgError, no write."""
    _fill(js, stream, 1)
    jet = stream.create_consumer().fetch(1, timeout=2)[0]
    sub = nc.subscribe("ackbatch.core")
    nc.publish("ackbatch.core", b"x", reply="ackbatch.reply")
    nc.publish("ackbatch.core", b"y")
    with_reply, without = sub.next_msg(timeout=2), sub.next_msg(timeout=2)
    made = Msg("s", "$JS.ACK.S.C.1.1.1.1700000000000000000.0", b"")  # no client
    writes = _count_writes(monkeypatch, nc)
    for other in (with_reply, without, made):
        with pytest.raises(NotJetStreamMsgError):
            ack_batch([jet, other])
    assert writes == [] and not jet.is_acked
    ack_batch([jet])
    assert writes == [1]


def test_an_empty_batch_sends_nothing(nc, monkeypatch):
    """ack_batch([]) and an empty iterator do nothing."""
    writes = _count_writes(monkeypatch, nc)
    ack_batch([])
    ack_batch(iter(()))
    assert writes == []


def test_messages_of_two_consumers_in_one_batch(nc, js, stream, monkeypatch):
    """Messages of two consumers (one client) go out in one write; both end with none pending."""
    _fill(js, stream, 6, "a")
    _fill(js, stream, 4, "b")
    first = stream.create_consumer(durable_name="one", filter_subject=f"{stream.name}.a")
    second = stream.create_consumer(durable_name="two", filter_subject=f"{stream.name}.b")
    msgs = first.fetch(6, timeout=2) + second.fetch(4, timeout=2)
    writes = _count_writes(monkeypatch, nc)
    ack_batch(msgs)
    assert writes == [10]
    nc.flush()
    wait_for(lambda: _ack_pending(first) == 0 and _ack_pending(second) == 0)


def test_messages_of_two_clients_one_write_each(shared_server, js, stream, nc, monkeypatch):
    """Messages fetched by two clients are acked through each one's own connection."""
    _fill(js, stream, 6)
    consumer = stream.create_consumer(durable_name="shared", ack_wait=30)
    with jetstream_sync.connect(shared_server.url) as other:
        theirs = other.jetstream().consumer(stream.name, "shared").fetch(3, timeout=2)
        ours = consumer.fetch(3, timeout=2)
        mine, their_writes = _count_writes(monkeypatch, nc), _count_writes(monkeypatch, other)
        ack_batch(ours + theirs)
        assert (mine, their_writes) == ([3], [3])
        other.flush()
    nc.flush()
    wait_for(lambda: _ack_pending(consumer) == 0)


@pytest.mark.interop
def test_messages_published_by_nats_py(nc, js, stream, shared_server):
    """Messages stored by nats-py (with headers) are fetched and acked in one batch."""

    async def publish() -> None:
        anc = await nats.connect(shared_server.url)
        ajs = anc.jetstream()
        for i in range(20):
            await ajs.publish(f"{stream.name}.py", b"py %d" % i, headers={"From": "nats-py"})
        await anc.close()

    asyncio.run(publish())
    consumer = stream.create_consumer(durable_name="frompy", ack_wait=30)
    msgs = consumer.fetch(20, timeout=2)
    assert [m.headers["From"] for m in msgs] == ["nats-py"] * 20
    ack_batch(msgs)
    nc.flush()
    wait_for(lambda: _ack_pending(consumer) == 0)


def test_a_closed_client_raises(shared_server, js, stream):
    """Acking the messages of a closed client raises ConnectionClosedError and marks none
    of them acked: nothing was sent (as nats.go and nats.py mark only a sent ack)."""
    _fill(js, stream, 2)
    with jetstream_sync.connect(shared_server.url) as other:
        msgs = other.jetstream().stream(stream.name).create_consumer().fetch(2, timeout=2)
    with pytest.raises(jetstream_sync.ConnectionClosedError):
        ack_batch(msgs)
    assert not any(m.is_acked for m in msgs)
    for final in (msgs[0].ack, msgs[0].nak, msgs[0].term):
        with pytest.raises(jetstream_sync.ConnectionClosedError):
            final()
        assert not msgs[0].is_acked


def test_a_batch_that_finds_no_room_times_out_unsent(nats_server):
    """A frozen server behind a full write buffer: ack_batch gives up after ``timeout``
    with WriteBufferTimeoutError and marks none acked; they ack once the server reads."""
    with jetstream_sync.connect(nats_server.url, ping_interval=60) as nc:
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="BATCHROOM", subjects=["batchroom"])
        for i in range(3):
            ctx.publish("batchroom", b"%d" % i)
        cons = stream.create_consumer(durable_name="d")
        msgs = cons.fetch(3, timeout=5)
        with stopped(nats_server):
            fill_past_high_water(nc)
            with pytest.raises(jetstream_sync.WriteBufferTimeoutError):
                ack_batch(msgs, timeout=0.5)
            assert not any(m.is_acked for m in msgs)
        ack_batch(msgs)
        nc.flush(timeout=30)
        assert cons.info().num_ack_pending == 0
