"""The ordered consumer: in order, exactly once, through deletions, gaps and restarts."""

from __future__ import annotations

import contextlib
import logging
import threading

import pytest

import jetstream_sync
from jetstream_sync.jetstream.consumer_config import OrderedConsumerConfig
from jetstream_sync.jetstream.enums import DeliverPolicy, StorageType
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.server import stopped


def test_fetch_and_next_in_order(js, stream):
    """fetch/next deliver in stream order; the link is an ack-none, R1, memory consumer."""
    publish_numbered(js, f"{stream.name}.a", 20)
    oc = stream.ordered_consumer()
    got = oc.fetch(15, timeout=2) + oc.fetch(15, timeout=1)
    assert [int(m.data) for m in got] == list(range(20))
    info = oc.info()
    assert info.config.ack_policy.value == "none" and info.config.mem_storage
    assert info.config.num_replicas == 1
    js.publish(f"{stream.name}.a", b"20")
    assert oc.next(timeout=2).data == b"20"


def test_filters_and_start_policy(js, stream):
    """filter_subjects and deliver_policy apply to the first link."""
    publish_numbered(js, f"{stream.name}.a", 5)
    publish_numbered(js, f"{stream.name}.b", 5, start=100)
    oc = js.ordered_consumer(
        stream.name, OrderedConsumerConfig(filter_subjects=(f"{stream.name}.b",))
    )
    assert [int(m.data) for m in oc.fetch(10, timeout=1)] == list(range(100, 105))
    oc2 = stream.ordered_consumer(deliver_policy=DeliverPolicy.LAST)
    assert [int(m.data) for m in oc2.fetch(10, timeout=1)] == [104]


def test_recreated_after_deletion_with_fetch(js, stream):
    """Deleting the server-side consumer between fetches: the next one resumes in order."""
    publish_numbered(js, f"{stream.name}.a", 10)
    oc = stream.ordered_consumer()
    first = oc.fetch(4, timeout=2)
    stream.delete_consumer(oc.name)
    rest = oc.fetch(10, timeout=2)
    if len(rest) < 6:
        rest += oc.fetch(10, timeout=2)
    assert [int(m.data) for m in first + rest] == list(range(10))


def test_a_recreated_stream_is_read_after_the_last_sequence_delivered(js, stream_name):
    """As nats.go's: a stream deleted and made again under the same name is read on from
    the stream sequence after the last one delivered, not from its start (documented)."""
    subjects = [f"{stream_name}.>"]
    js.create_stream(name=stream_name, subjects=subjects)
    publish_numbered(js, f"{stream_name}.a", 5)
    oc = js.ordered_consumer(stream_name)
    assert [int(m.data) for m in oc.fetch(5, timeout=2)] == list(range(5))
    js.delete_stream(stream_name)
    js.create_stream(name=stream_name, subjects=subjects)
    publish_numbered(js, f"{stream_name}.a", 8)  # sequences 1 to 8 of the new stream
    got = oc.fetch(10, timeout=2)
    if len(got) < 3:
        got += oc.fetch(10, timeout=2)
    assert [m.metadata.sequence.stream for m in got] == [6, 7, 8]


def test_messages_recover_from_deletion(js, stream):
    """messages() recreates the link on 409 Consumer Deleted and goes on in order."""
    publish_numbered(js, f"{stream.name}.a", 100)
    oc = stream.ordered_consumer()
    seen = []
    with oc.messages(max_messages=10, expires=2, heartbeat=0.5) as it:
        for msg in it:
            seen.append(int(msg.data))
            if len(seen) == 30:
                stream.delete_consumer(oc.name)
            if len(seen) == 100:
                break
    assert seen == list(range(100))


def test_consume_in_order(js, stream):
    """consume() on an ordered consumer delivers in order on its own thread."""
    publish_numbered(js, f"{stream.name}.a", 200)
    seen = []
    with stream.ordered_consumer() as oc:
        ctx = oc.consume(lambda m: seen.append(int(m.data)), max_messages=50)
        wait_for(lambda: len(seen) == 200)
        ctx.stop()
    assert seen == list(range(200))


def test_with_block_deletes_the_link(js, stream):
    """An ordered consumer used in a with block removes its server-side consumer."""
    publish_numbered(js, f"{stream.name}.a", 3)
    with stream.ordered_consumer() as oc:
        assert len(oc.fetch(3, timeout=2)) == 3
        name = oc.name
        assert name in list(stream.consumer_names())
    wait_for(lambda: name not in list(stream.consumer_names()))


def test_gap_triggers_reset(js, stream):
    """A consumer-sequence gap recreates the link from the last delivered sequence + 1."""
    publish_numbered(js, f"{stream.name}.a", 10)
    oc = stream.ordered_consumer()
    assert len(oc.fetch(3, timeout=2)) == 3
    oc._consumer_seq = 1  # as if a message had gone missing
    before = oc.name
    got = []
    while len(got) < 7:
        got += oc.fetch(7, timeout=2)
    assert oc.name != before
    assert [int(m.data) for m in got] == list(range(3, 10))


@pytest.mark.slow
def test_10k_in_order_through_two_deletions_and_a_restart(restartable_server):
    """10,000 messages in order, exactly once, while the consumer is deleted twice and
    the server restarted once."""
    total = 10_000
    with jetstream_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="O", subjects=["o.>"], storage=StorageType.FILE)
        publish_numbered(js, "o.x", total)
        oc = st.ordered_consumer()
        seen = []
        with oc.messages(max_messages=200, expires=2, heartbeat=0.5) as it:
            for msg in it:
                seen.append(msg.metadata.sequence.stream)
                n = len(seen)
                if n in (2000, 4000):
                    st.delete_consumer(oc.name)
                elif n == 6000:
                    restartable_server.restart()
                if n == total:
                    break
        assert seen == list(range(1, total + 1))
        assert oc._serial >= 4


def test_fits_the_streams_consumer_inactive_threshold_limit(js, stream_name):
    """On a stream limiting consumers' inactive_threshold, links are made within the limit."""
    stream = js.create_stream(
        name=stream_name,
        subjects=[f"{stream_name}.>"],
        consumer_limits=jetstream_sync.StreamConsumerLimits(inactive_threshold=60.0),
    )
    publish_numbered(js, f"{stream_name}.a", 3)
    oc = stream.ordered_consumer()
    assert [int(m.data) for m in oc.fetch(3, timeout=2)] == [0, 1, 2]
    assert oc.info().config.inactive_threshold == 60.0


def test_missed_heartbeats_recreate_the_link(nats_server):
    """A stalled server (no heartbeats) makes the ordered layer replace its link; nothing is
    lost or repeated, and the reset is not reported to the error handler as a failure."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=1.0)
        st = js.create_stream(name="HB", subjects=["hb.>"])
        publish_numbered(js, "hb.x", 5)
        oc = st.ordered_consumer()
        seen: list[int] = []
        errors: list[BaseException] = []
        with oc.consume(
            lambda m: seen.append(int(m.data)), error_handler=errors.append,
            max_messages=10, expires=2, heartbeat=0.2,
        ):  # fmt: skip
            wait_for(lambda: len(seen) == 5)
            first_link, serial = oc.name, oc._serial
            with stopped(nats_server):
                wait_for(lambda: oc._serial > serial, timeout=10)  # a reset was attempted
            publish_numbered(js, "hb.x", 5, start=5)
            wait_for(lambda: len(seen) == 10, timeout=20)
        assert seen == list(range(10))
        assert oc.name != first_link
        assert not any(isinstance(e, jetstream_sync.NoHeartbeatError) for e in errors)


def test_reconnect_recreates_the_link(restartable_server):
    """After a reconnect the ordered layer starts a new link after the last delivered message."""
    with jetstream_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="RC", subjects=["rc.>"], storage=StorageType.FILE)
        publish_numbered(js, "rc.x", 5)
        oc = st.ordered_consumer()
        with oc.messages(max_messages=10, expires=2, heartbeat=0.5) as it:
            assert [int(it.next(timeout=5).data) for _ in range(5)] == list(range(5))
            first_link = oc.name
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            publish_numbered(js, "rc.x", 5, start=5)
            assert [int(it.next(timeout=20).data) for _ in range(5)] == list(range(5, 10))
            assert oc.name != first_link
            with pytest.raises(jetstream_sync.TimeoutError):
                it.next(timeout=0.5)  # nothing repeated


def test_ordered_iterator_stops_listening_when_it_ends(js, stream):
    """stop() and drain() remove the reconnect listeners; a bad argument to next() does not."""
    publish_numbered(js, f"{stream.name}.a", 3)
    before = len(js.client._listeners)
    oc = stream.ordered_consumer()
    it = oc.messages(max_messages=10)
    assert len(js.client._listeners) == before + 2  # the ordered layer's and its link's
    assert it.next(timeout=5).data == b"0"
    it.stop()
    assert len(js.client._listeners) == before
    it2 = oc.messages(max_messages=10)
    it2.drain()
    assert [int(m.data) for m in it2] in ([], [1], [1, 2])  # what was delivered before it
    assert len(js.client._listeners) == before
    it3 = oc.messages(max_messages=10)
    with pytest.raises(ValueError):
        it3.next(timeout=-1)  # bad input is not the end of the iteration
    assert len(js.client._listeners) == before + 2
    it3.stop()
    assert len(js.client._listeners) == before


@pytest.mark.parametrize("name", ["", "has space", "a.b", "a*", "a>", "a/b", 7])
def test_a_bad_stream_name_is_refused_when_the_consumer_is_made(js, name):
    """ordered_consumer() checks the stream's name at once, as every consumer call does,
    not at the first pull; nothing is sent."""
    sent = js.client.stats.out_msgs
    with pytest.raises((ValueError, TypeError)):
        js.ordered_consumer(name)
    assert js.client.stats.out_msgs == sent


def test_next_buffered_hands_out_what_is_here_in_one_batch(js, stream):
    """The messages iterator's next_buffered() (the consume loop's and the watch feed's):
    the first message as next() gives it, then every in-order message already buffered,
    in one deque; nothing is lost or repeated across calls."""
    publish_numbered(js, f"{stream.name}.a", 50)
    oc = stream.ordered_consumer()
    with oc.messages(max_messages=100) as it:
        # White box: the link's subscription receives all 50 before next() takes from it, so
        # next() takes them in one go and buffers the other 49 (taken as they came, the
        # buffer held whatever had arrived when next() ran: a loaded run saw fewer).
        inner = it._inner
        wait_for(lambda: inner._sub.pending_msgs >= 50, message="the 50 never arrived")
        first = it.next(timeout=5)
        assert len(inner.buffered()) == 49
        batch = it.next_buffered()
        got = [first, *batch]
        batch.clear()  # taken (the caller empties it)
        assert [int(m.data) for m in got] == list(range(50))
        js.publish(f"{stream.name}.a", b"50")
        later = it.next_buffered()
        assert [m.data for m in later] == [b"50"]


def test_stop_discards_the_batch_next_buffered_handed_out(js, stream):
    """stop() empties the batch being taken, as the plain iterator's stop() empties its buffer:
    a consume callback that stops gets no further message."""
    publish_numbered(js, f"{stream.name}.a", 20)
    oc = stream.ordered_consumer()
    it = oc.messages(max_messages=100)
    wait_for(lambda: it._inner._sub.pending_msgs >= 20, message="the 20 never arrived")
    batch = it.next_buffered()
    assert len(batch) == 20
    batch.popleft()
    it.stop()
    assert not batch
    with oc.messages(max_messages=100) as again:  # the discarded ones were never handed over
        assert [int(again.next(timeout=5).data) for _ in range(19)] == list(range(1, 20))

    seen = []
    holder = []
    made = threading.Event()  # the callback may run before consume() returned its handle

    def cb(msg):
        seen.append(msg)
        assert made.wait(10)
        holder[0].stop()

    oc.close()
    with stream.ordered_consumer() as fresh:
        holder.append(fresh.consume(cb, max_messages=100))
        made.set()
        wait_for(lambda: holder[0].closed, timeout=10)
    assert len(seen) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda oc: oc.fetch(0),
        lambda oc: oc.fetch_no_wait(0),
        lambda oc: oc.next(timeout=float("nan")),
        lambda oc: oc.messages(max_messages=0),
        lambda oc: oc.messages(expires=0.5),
        lambda oc: oc.consume(lambda m: None, heartbeat=100),
    ],
)
def test_bad_pull_arguments_are_refused_before_a_link_is_made(stream, call):
    """Bad input to a pull raises ValueError with nothing sent: no server-side consumer."""
    with stream.ordered_consumer() as oc:
        with pytest.raises(ValueError):
            call(oc)
        assert oc.name is None
        assert list(stream.consumer_names()) == []


async def _async_handler(arg):
    """A coroutine function: the consuming thread would never await it."""


@pytest.mark.parametrize(
    "call",
    [
        lambda oc: oc.consume("handler"),
        lambda oc: oc.consume(_async_handler),
        lambda oc: oc.consume(print, error_handler=_async_handler),
    ],
)
def test_a_bad_consume_callback_is_refused_before_a_link_is_made(stream, call):
    """consume() with a callback it cannot call raises TypeError: no server-side consumer."""
    with stream.ordered_consumer() as oc:
        with pytest.raises(TypeError, match="^(callback|error_handler) must be"):
            call(oc)
        assert oc.name is None
        assert list(stream.consumer_names()) == []


def test_a_warning_without_an_error_handler_is_logged(js, stream, caplog):
    """What the link's iterator recovers from and the ordered layer does not handle (here a
    message larger than ``max_bytes``) is logged when nobody gave a handler, as the plain
    iterator logs it, instead of being dropped."""
    js.publish(f"{stream.name}.big", b"x" * 1000)
    oc = stream.ordered_consumer()

    def warned(it) -> bool:
        with contextlib.suppress(jetstream_sync.TimeoutError):
            it.next(timeout=0.2)  # the iterator pulls (and warns) on the caller's thread
        return "recovered" in caplog.text

    try:
        with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
            with oc.messages(max_bytes=200) as it:
                wait_for(lambda: warned(it), timeout=20)
        assert "MaxBytes" in caplog.text and stream.name in caplog.text, caplog.text
    finally:
        oc.close()


def test_fetch_after_a_stopped_iterator_still_waits_out_a_failed_reset(js, stream_name):
    """A stopped messages() iterator does not stop the consumer: a later fetch() whose
    link must be recreated, and the first attempts are refused (the stream's one
    consumer slot taken), backs off until its timeout, not IteratorClosedError."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], max_consumers=1)
    js.publish(f"{stream_name}.a", b"1")
    oc = stream.ordered_consumer()
    assert [m.data for m in oc.fetch(1, timeout=5)] == [b"1"]
    link = oc.name
    oc.messages().stop()  # it retires the link (its pull's messages went unread)
    assert oc.name is None
    stream.delete_consumer(link)
    js.create_consumer(stream_name, jetstream_sync.ConsumerConfig(durable_name="other"))
    with pytest.raises(TimeoutError, match="could not recreate"):
        oc.fetch(1, timeout=1.5)
    js.delete_consumer(stream_name, "other")
    js.publish(f"{stream_name}.a", b"2")
    assert [m.data for m in oc.fetch(1, timeout=5)] == [b"2"]
    oc.close()
