"""Msg's JetStream side: metadata from both ack-subject layouts, and every kind of ack."""

from __future__ import annotations

import sys
import threading

import pytest

import jetstream_sync
from jetstream_sync._ack_subject import parse_metadata
from jetstream_sync.errors import MsgAlreadyAckedError, NotJetStreamMsgError
from jetstream_sync.msg import Msg
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.polling import wait_for
from tests.fixtures.raw_client import RawClient
from tests.fixtures.server import stopped
from tests.fixtures.stall import fill_past_high_water


def test_metadata_v1_layout():
    """A 9-token ack subject gives every field; the timestamp keeps its nanoseconds."""
    md = parse_metadata("$JS.ACK.ORDERS.dur.2.15.7.1700000000123456789.42")
    assert (md.stream, md.consumer, md.num_delivered, md.num_pending) == ("ORDERS", "dur", 2, 42)
    assert (md.sequence.stream, md.sequence.consumer) == (15, 7)
    assert md.timestamp.nanosecond == 789 and md.timestamp.epoch_ns == 1700000000123456789
    assert md.domain is None


def test_metadata_v2_layout_with_domain_and_extra_tokens():
    """The 12-token layout carries a domain and account hash; 11 tokens are accepted too."""
    md = parse_metadata("$JS.ACK.hub.ACCHASH.S.c.1.3.2.1700000000000000001.0.rnd")
    assert (md.domain, md.stream, md.consumer, md.sequence.stream) == ("hub", "S", "c", 3)
    md = parse_metadata("$JS.ACK._.ACCHASH.S.c.1.3.2.1700000000000000001.0")
    assert md.domain is None and md.sequence.consumer == 2


def test_not_a_jetstream_message():
    """Metadata and acks on a plain message raise NotJetStreamMsgError."""
    msg = Msg("a", "_INBOX.x", b"")
    with pytest.raises(NotJetStreamMsgError):
        msg.metadata  # noqa: B018
    with pytest.raises(NotJetStreamMsgError):
        msg.ack()
    with pytest.raises(NotJetStreamMsgError):
        parse_metadata("$JS.ACK.too.short")


def test_second_final_ack_raises_and_in_progress_repeats(js, stream):
    """in_progress may repeat; a second ack/nak/term raises MsgAlreadyAckedError."""
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer().fetch(1, timeout=2)[0]
    msg.in_progress()
    msg.in_progress()
    assert not msg.is_acked
    msg.ack_sync()
    assert msg.is_acked
    for again in (msg.ack, msg.nak, msg.term, msg.in_progress, msg.double_ack):
        with pytest.raises(MsgAlreadyAckedError):
            again()


def test_ack_sync_that_sent_nothing_can_be_sent_again(js, stream):
    """An ack_sync refused before sending (a bad timeout) leaves the message unacked."""
    js.publish(f"{stream.name}.a", b"1")
    cons = stream.create_consumer(durable_name="again")
    msg = cons.fetch(1, timeout=2)[0]
    with pytest.raises(ValueError):
        msg.ack_sync(timeout=-1)
    assert not msg.is_acked
    msg.ack_sync(timeout=2)
    assert msg.is_acked and cons.info().num_ack_pending == 0


def test_ack_removes_from_pending(js, stream):
    """Acked messages leave num_ack_pending; ack_sync waits for the server."""
    for i in range(3):
        js.publish(f"{stream.name}.a", b"%d" % i)
    cons = stream.create_consumer(durable_name="d")
    msgs = cons.fetch(3, timeout=2)
    msgs[0].ack()
    msgs[1].ack_sync(timeout=2)
    msgs[2].double_ack()
    wait_for(lambda: cons.info().num_ack_pending == 0)


def test_nak_with_delay_redelivers_after_the_delay(js, stream):
    """nak(delay) comes back after the delay with num_delivered == 2."""
    js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(durable_name="d", ack_wait=30)
    first = cons.fetch(1, timeout=2)[0]
    first.nak(delay=2)
    assert cons.fetch(1, timeout=0.5) == []  # not before the delay
    again = cons.fetch(1, timeout=5)
    assert len(again) == 1 and again[0].metadata.num_delivered == 2
    assert again[0].data == b"x"


def test_nak_without_delay_redelivers_at_once(js, stream):
    """nak() redelivers immediately."""
    js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(ack_wait=30)
    cons.fetch(1, timeout=2)[0].nak()
    assert cons.fetch(1, timeout=2)[0].metadata.num_delivered == 2


@pytest.mark.parametrize("delay", [0, 0.0, -1, -1e-9])
def test_nak_delay_of_zero_or_less_redelivers_at_once_despite_a_backoff(js, stream, delay):
    """nak(delay<=0) is a plain NAK, as in nats.go. Sent as a delay, the server takes a
    redelivered message's delay as an ack wait (1 s) that ran out and holds it for the
    backoff step of its delivery count (30 s) instead of redelivering it at once."""
    js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(backoff=[1, 30], max_deliver=5)
    cons.fetch(1, timeout=2)[0].nak()
    cons.fetch(1, timeout=10)[0].nak(delay=delay)
    again = cons.fetch(1, timeout=10)
    assert [m.metadata.num_delivered for m in again] == [3]


def test_term_is_not_redelivered(js, stream):
    """A terminated message never comes back, even after ack_wait."""
    js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(ack_wait=0.5)
    cons.fetch(1, timeout=2)[0].term(reason="bad payload")
    # The server applies a term from its ack queue: wait for that, then ack_wait passes.
    wait_for(lambda: cons.info().num_ack_pending == 0)
    assert cons.fetch(1, timeout=1.5) == []
    assert cons.info().num_ack_pending == 0


def test_unacked_is_redelivered_after_ack_wait(js, stream):
    """Without an ack, the message returns after ack_wait."""
    js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(ack_wait=0.5)
    cons.fetch(1, timeout=2)
    assert cons.fetch(1, timeout=3)[0].metadata.num_delivered == 2


def test_ack_of_a_message_stored_under_a_non_utf8_subject(js, stream, shared_server):
    """A message published by another client to a subject that is not UTF-8 is acked by ack()."""
    raw = RawClient(shared_server.port)
    try:
        raw.send(b"PUB %s.caf\xe9 1\r\n1\r\n" % stream.name.encode())
    finally:
        raw.close()
    wait_for(lambda: stream.info().state.messages == 1)
    consumer = stream.create_consumer(durable_name="raw")
    (msg,) = consumer.fetch(1, timeout=5)
    assert msg.subject == f"{stream.name}.caf\udce9"
    msg.ack()
    js.client.flush(timeout=5)
    wait_for(lambda: consumer.info().num_ack_pending == 0)
    assert consumer.info().ack_floor.stream_seq == 1


@pytest.mark.parametrize(
    ("send", "body"),
    [(Msg.ack, b"+ACK"), (Msg.nak, b"-NAK"), (Msg.in_progress, b"+WPI"), (Msg.term, b"+TERM")],
)
def test_acks_to_a_non_utf8_ack_subject_reach_its_bytes(send, body):
    """An ack subject holding bytes that are not UTF-8 is written back byte for byte.

    A real server drops client messages whose reply is a ``$JS.ACK`` subject,
    so a fake server delivers this one.
    """
    ack_subject = b"$JS.ACK.S\xe9.c\xff.1.2.3.1700000000000000000.0"
    with FakeServer() as fake, jetstream_sync.connect(fake.url) as nc:
        conn = fake.connection(0)
        sub = nc.subscribe("rawack.x")
        conn.sid_of(b"rawack.x")
        conn.msg(b"rawack.x", b"m", reply=ack_subject)
        msg = sub.next_msg(timeout=5)
        assert msg.reply == ack_subject.decode("utf-8", "surrogateescape")
        send(msg)
        wait_for(lambda: conn.pubs)
        assert conn.pubs == [(ack_subject, b"", body)]
        assert nc.is_connected


def _one_fetched(nc: jetstream_sync.Client) -> tuple[jetstream_sync.Consumer, jetstream_sync.Msg]:
    """A durable consumer of a new stream ``ACKROOM`` and the one message fetched from it."""
    ctx = nc.jetstream()
    stream = ctx.create_stream(name="ACKROOM", subjects=["ackroom"])
    ctx.publish("ackroom", b"1")
    cons = stream.create_consumer(durable_name="d")
    return cons, cons.fetch(1, timeout=5)[0]


def test_ack_sync_that_found_no_room_to_send_can_be_sent_again(nats_server):
    """A frozen server behind a full write buffer: ack_sync times out having sent nothing
    (WriteBufferTimeoutError), so the message stays unacked and the ack goes once the
    server reads again."""
    with jetstream_sync.connect(nats_server.url, ping_interval=60) as nc:
        cons, msg = _one_fetched(nc)
        with stopped(nats_server):
            fill_past_high_water(nc)
            with pytest.raises(jetstream_sync.WriteBufferTimeoutError, match="nothing"):
                msg.ack_sync(timeout=0.5)
            assert not msg.is_acked
        msg.ack_sync(timeout=30)
        assert msg.is_acked and cons.info().num_ack_pending == 0


@pytest.mark.parametrize(
    "send",
    [
        lambda msg: msg.ack(timeout=0.5),
        lambda msg: msg.nak(timeout=0.5),
        lambda msg: msg.term("bad", timeout=0.5),
        lambda msg: msg.in_progress(timeout=0.5),
    ],
    ids=["ack", "nak", "term", "in_progress"],
)
def test_ack_that_found_no_room_to_send_times_out_unsent(nats_server, send):
    """A frozen server behind a full write buffer: ack, nak, term and in_progress give up
    after ``timeout`` with WriteBufferTimeoutError, nothing sent and the message not acked,
    instead of waiting until the connection is declared stale."""
    with jetstream_sync.connect(nats_server.url, ping_interval=60) as nc:
        cons, msg = _one_fetched(nc)
        with stopped(nats_server):
            fill_past_high_water(nc)
            with pytest.raises(jetstream_sync.WriteBufferTimeoutError):
                send(msg)
            assert not msg.is_acked
        msg.ack()
        nc.flush(timeout=30)
        # The server applies an ack from its ack queue, after answering the flush's PING.
        wait_for(lambda: cons.info().num_ack_pending == 0)


def test_ack_timeout_is_checked_before_sending(js, stream):
    """A bad ack timeout is a ValueError; nothing is sent and the message stays unacked."""
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer().fetch(1, timeout=2)[0]
    for bad in (0, -1, float("nan"), "1"):
        for send in (msg.ack, msg.nak, msg.in_progress, msg.term):
            with pytest.raises((ValueError, TypeError)):
                send(timeout=bad)
    assert not msg.is_acked


def test_auto_ack_to_a_frozen_server_lets_unsubscribe_return(nats_server):
    """A push callback's automatic ack that finds no room gives up after the context's
    timeout and is reported to error_cb (the server redelivers after ack_wait):
    unsubscribe() returns while the server is still frozen."""
    errors: list[BaseException] = []
    with jetstream_sync.connect(nats_server.url, ping_interval=60, error_cb=errors.append) as nc:
        ctx = nc.jetstream(timeout=0.5)
        ctx.create_stream(name="AUTOACK", subjects=["autoack"])
        entered = threading.Event()
        release = threading.Event()

        def handler(msg):
            entered.set()
            release.wait(30)

        sub = ctx.subscribe("autoack", cb=handler)
        ctx.publish("autoack", b"1")
        assert entered.wait(10)
        with stopped(nats_server):
            fill_past_high_water(nc)
            release.set()
            sub.unsubscribe()
            wait_for(lambda: errors)
        assert isinstance(errors[0], jetstream_sync.WriteBufferTimeoutError)


def test_term_reason_past_max_payload_is_refused_before_sending(nc, js, stream):
    """A term reason that makes the ack pass max_payload raises MaxPayloadError with
    nothing sent: the server would close the connection of every thread."""
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer().fetch(1, timeout=2)[0]
    with pytest.raises(jetstream_sync.MaxPayloadError):
        msg.term(reason="r" * nc.max_payload)
    assert not msg.is_acked
    nc.flush(timeout=5)
    assert nc.stats.reconnects == 0
    msg.term(reason="fine")
    assert msg.is_acked


@pytest.mark.parametrize("reason", [5, b"bytes", ["x"]])
def test_term_reason_that_is_not_a_str_is_a_type_error(js, stream, reason):
    """term(reason=) takes a str: anything else is a TypeError before sending."""
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer().fetch(1, timeout=2)[0]
    with pytest.raises(TypeError, match="reason"):
        msg.term(reason=reason)
    assert not msg.is_acked


@pytest.mark.parametrize("delay", [10**12, 1e11, 2**63])
def test_nak_delay_past_int64_nanoseconds_is_refused_before_sending(js, stream, delay):
    """A nak delay past what the wire's int64 nanoseconds hold (about 292 years) is a
    ValueError, nothing sent: the server reads it as a bad delay and redelivers at once,
    the opposite of what was asked."""
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer().fetch(1, timeout=2)[0]
    with pytest.raises(ValueError, match="delay"):
        msg.nak(delay=delay)
    assert not msg.is_acked


def test_one_message_acked_from_16_threads_is_sent_once(js, stream):
    """16 threads ack, nak or term one message at once: exactly one of them sends; the
    others get MsgAlreadyAckedError (the check and the claim are one step)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows
    try:
        for i in range(40):
            js.publish(f"{stream.name}.a", b"%d" % i)
        msgs = stream.create_consumer(ack_wait=30).fetch(40, timeout=5)
        assert len(msgs) == 40
        for n, msg in enumerate(msgs):
            send = (msg.ack, msg.term, msg.nak, msg.ack_sync)[n % 4]
            barrier = threading.Barrier(16)
            sent: list[int] = []
            refused: list[int] = []

            def race(send=send, barrier=barrier, sent=sent, refused=refused) -> None:
                barrier.wait()
                try:
                    send()
                except MsgAlreadyAckedError:
                    refused.append(1)
                else:
                    sent.append(1)

            threads = [threading.Thread(target=race) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert (len(sent), len(refused)) == (1, 15)
    finally:
        sys.setswitchinterval(interval)
