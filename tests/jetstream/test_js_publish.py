"""JetStream publishing against a real server: sync, async, expectations, TTL, batches."""

from __future__ import annotations

import json
import threading

import pytest

import jetstream_sync as js
from jetstream_sync._deadline import Deadline
from jetstream_sync.jetstream._api import RequiredApiLevelError, check_api_reply
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for


@pytest.fixture
def ctx(js):
    """The shared ``js`` context (in this module ``js`` names the package)."""
    return js


@pytest.fixture
def stream_options():
    """This module's streams allow per-message TTLs."""
    return {"allow_msg_ttl": True}


def test_publish_returns_pub_ack(ctx, stream):
    """publish() returns the stream and sequence that stored the message."""
    ack = ctx.publish(f"{stream.name}.a", b"one")
    assert (ack.stream, ack.seq, ack.duplicate) == (stream.name, 1, False)
    assert ctx.publish(f"{stream.name}.a", "two").seq == 2
    assert stream.get_msg(2).data == b"two"


def test_headers_are_stored(ctx, stream):
    """User headers are stored with the message."""
    ctx.publish(f"{stream.name}.h", b"x", headers={"Trace": "1", "Tag": ["a", "b"]})
    stored = stream.get_msg(1)
    assert stored.headers["Trace"] == "1"
    assert stored.headers.get_all("Tag") == ["a", "b"]


def test_msg_id_deduplicates(ctx, stream):
    """The same msg_id within the duplicate window is acknowledged as a duplicate."""
    first = ctx.publish(f"{stream.name}.d", b"x", msg_id="order-1")
    again = ctx.publish(f"{stream.name}.d", b"x", msg_id="order-1")
    assert again.duplicate and again.seq == first.seq
    assert stream.info().state.messages == 1


def test_an_option_replaces_the_same_header_of_headers(ctx, stream):
    """msg_id= and the expectations replace a header of the same name in headers= (as
    nats.go and nats.py do): republishing a received message's headers with a new
    msg_id stores it, not a duplicate of the old one."""
    copied = {"Nats-Msg-Id": "old", "Nats-Expected-Last-Sequence": "99", "Trace": "t"}
    first = ctx.publish(f"{stream.name}.r", b"1", msg_id="old")
    for send in (ctx.publish, lambda *a, **k: ctx.publish_async(*a, **k).result(5)):
        ack = send(
            f"{stream.name}.r", b"2", headers=copied, msg_id=f"new-{first.seq}",
            expected_last_seq=first.seq,
        )  # fmt: skip
        assert (ack.seq, ack.duplicate) == (first.seq + 1, False)
        headers = stream.get_msg(ack.seq).headers
        assert {k: headers.get_all(k) for k in headers} == {
            "Nats-Msg-Id": [f"new-{first.seq}"],
            "Nats-Expected-Last-Sequence": [str(first.seq)],
            "Trace": ["t"],
        }
        first = ack


def test_expected_stream(ctx, stream):
    """A wrong expected_stream raises StreamWrongExpectedError."""
    ctx.publish(f"{stream.name}.e", b"x", expected_stream=stream.name)
    with pytest.raises(js.StreamWrongExpectedError) as info:
        ctx.publish(f"{stream.name}.e", b"x", expected_stream="OTHER")
    assert info.value.err_code == 10060


def test_expected_last_seq(ctx, stream):
    """A wrong expected_last_seq raises WrongLastSequenceError."""
    ctx.publish(f"{stream.name}.s", b"1", expected_last_seq=0)
    ctx.publish(f"{stream.name}.s", b"2", expected_last_seq=1)
    with pytest.raises(js.WrongLastSequenceError):
        ctx.publish(f"{stream.name}.s", b"3", expected_last_seq=1)


def test_expected_last_subject_seq(ctx, stream):
    """A wrong expected_last_subject_seq raises WrongLastSequenceError (10071 or 10164)."""
    ctx.publish(f"{stream.name}.a", b"1", expected_last_subject_seq=0)
    ctx.publish(f"{stream.name}.b", b"2")
    ctx.publish(f"{stream.name}.a", b"3", expected_last_subject_seq=1)
    with pytest.raises(js.WrongLastSequenceError) as info:
        ctx.publish(f"{stream.name}.a", b"4", expected_last_subject_seq=1)
    assert info.value.err_code in (10071, 10164)


def test_expected_last_msg_id(ctx, stream):
    """A wrong expected_last_msg_id raises WrongLastMsgIdError."""
    ctx.publish(f"{stream.name}.m", b"1", msg_id="a")
    ctx.publish(f"{stream.name}.m", b"2", msg_id="b", expected_last_msg_id="a")
    with pytest.raises(js.WrongLastMsgIdError):
        ctx.publish(f"{stream.name}.m", b"3", expected_last_msg_id="a")


def test_publish_without_stream_raises_no_responders_after_retries(ctx):
    """Publishing where no stream listens raises NoRespondersError after the retries."""
    with pytest.raises(js.NoRespondersError):
        ctx.publish("no.stream.here", b"x", retry_attempts=1, timeout=3)


def test_publish_bad_input_raises_before_sending(ctx):
    """Bad subjects, headers and TTLs are rejected before anything is sent."""
    with pytest.raises(js.BadSubjectError):
        ctx.publish("bad subject", b"x")
    with pytest.raises(js.BadHeaderError):
        ctx.publish("ok.subject", b"x", headers={"K": "a\r\nb"})
    with pytest.raises(ValueError, match="ttl"):
        ctx.publish("ok.subject", b"x", ttl=0.5)


def test_per_message_ttl_expires(ctx, stream):
    """A message published with ttl=1 is removed by the server after about a second."""
    ctx.publish(f"{stream.name}.ttl", b"short", ttl=1)
    ctx.publish(f"{stream.name}.keep", b"long", ttl="never")
    assert stream.get_msg(1).headers["Nats-TTL"] == "1s"
    wait_for(lambda: stream.info().state.messages == 1, timeout=10, message="TTL did not expire")
    with pytest.raises(js.MessageNotFoundError):
        stream.get_msg(1)


def test_publish_and_publish_async_store_the_same_headers(ctx, stream):
    """Both publish paths send every header option the same way (one builder)."""
    ctx.publish(f"{stream.name}.same.0", b"x", msg_id="id-1")
    for seq, send in ((2, ctx.publish), (3, lambda *a, **k: ctx.publish_async(*a, **k).result(5))):
        last_id = f"id-{seq - 1}"
        ack = send(
            f"{stream.name}.same.{seq}", b"x", headers={"Trace": ["a", "b"]},
            msg_id=f"id-{seq}", expected_stream=stream.name, expected_last_seq=seq - 1,
            expected_last_subject_seq=0, expected_last_msg_id=last_id, ttl=60,
        )  # fmt: skip
        assert ack.seq == seq
        headers = stream.get_msg(seq).headers
        assert {k: headers.get_all(k) for k in headers} == {
            "Trace": ["a", "b"],
            "Nats-Msg-Id": [f"id-{seq}"],
            "Nats-Expected-Stream": [stream.name],
            "Nats-Expected-Last-Sequence": [str(seq - 1)],
            "Nats-Expected-Last-Subject-Sequence": ["0"],
            "Nats-Expected-Last-Msg-Id": [last_id],
            "Nats-TTL": ["60s"],
        }


def test_publish_async_resolves_every_future(ctx, stream):
    """publish_async futures resolve to PubAcks with consecutive sequences."""
    futures = [ctx.publish_async(f"{stream.name}.async", b"%d" % i) for i in range(500)]
    ctx.publish_async_completed(timeout=10)
    assert ctx.publish_async_pending() == 0
    assert sorted(f.result().seq for f in futures) == list(range(1, 501))


def test_publish_async_error_fails_the_future(ctx, stream):
    """An expectation failure arrives as the future's exception."""
    ctx.publish(f"{stream.name}.x", b"x")
    future = ctx.publish_async(f"{stream.name}.x", b"y", expected_last_seq=99)
    with pytest.raises(js.WrongLastSequenceError):
        future.result(timeout=5)


def test_publish_async_window_never_exceeded_by_four_threads(nc, stream):
    """20,000 publish_async calls from 4 threads never exceed a window of 100."""
    ctx = nc.jetstream(max_ack_inflight=100)
    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], ctx.publish_async_pending())
            stop.wait(0.0005)

    futures: list = []
    lock = threading.Lock()

    def publisher(n):
        mine = [ctx.publish_async(f"{stream.name}.w{n}", b"x") for _ in range(5000)]
        with lock:
            futures.extend(mine)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=publisher, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx.publish_async_completed(timeout=30)
    stop.set()
    watcher.join()
    assert peak[0] <= 100
    assert len(futures) == 20000
    assert len({f.result().seq for f in futures}) == 20000


def test_publish_async_without_backpressure_raises(nc, stream):
    """With backpressure off, a full window raises TooManyPendingAcksError."""
    ctx = nc.jetstream(max_ack_inflight=1, backpressure_on_inflight=False, ack_timeout=5)
    with pytest.raises(js.TooManyPendingAcksError):
        for _ in range(1000):
            ctx.publish_async(f"{stream.name}.full", b"x")
    ctx.publish_async_completed(timeout=5)


def test_publish_async_ack_timeout(nc):
    """A future whose ack never comes fails with TimeoutError after ack_timeout."""
    ctx = nc.jetstream(ack_timeout=0.3)
    nc.subscribe("black.hole")  # a listener that never answers
    nc.flush()
    future = ctx.publish_async("black.hole", b"x")
    with pytest.raises(TimeoutError):
        future.result(timeout=5)
    assert ctx.publish_async_pending() == 0


def test_publish_async_fails_on_disconnect(restartable_server):
    """Futures whose acks can no longer arrive fail with ConnectionLostError on a disconnect."""
    nc = js.connect(restartable_server.url, reconnect_time_wait=0.1)
    try:
        ctx = nc.jetstream(ack_timeout=60)
        nc.subscribe("never.acked")  # keeps the acks from ever coming
        nc.flush()
        futures = [ctx.publish_async("never.acked", b"x") for _ in range(10)]
        restartable_server.restart()
        for future in futures:
            with pytest.raises(js.ConnectionLostError):
                future.result(timeout=15)
    finally:
        nc.close()


def test_close_fails_pending_futures(shared_server):
    """Closing the client fails pending futures with ConnectionClosedError."""
    nc = js.connect(shared_server.url)
    ctx = nc.jetstream(ack_timeout=60)
    nc.subscribe("never.acked.2")
    nc.flush()
    future = ctx.publish_async("never.acked.2", b"x")
    nc.close()
    with pytest.raises(js.ConnectionClosedError):
        future.result(timeout=5)


def test_atomic_batch_success(ctx):
    """publish_batch stores every message and acks the commit with the batch size."""
    name = unique_stream_name("BATCH")
    ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_atomic=True)
    try:
        ack = ctx.publish_batch([(f"{name}.a", b"%d" % i) for i in range(10)])
        assert (ack.seq, ack.batch_size) == (10, 10)
        assert ctx.stream(name).cached_info.state.messages == 10
    finally:
        ctx.delete_stream(name)


def test_atomic_batch_refused_stores_nothing(ctx, stream):
    """A batch to a stream without allow_atomic fails and stores none of it."""
    with pytest.raises(js.APIError):
        ctx.publish_batch([(f"{stream.name}.a", b"1"), (f"{stream.name}.a", b"2", {"K": "v"})])
    assert stream.info().state.messages == 0


def test_atomic_batch_bad_input(ctx):
    """An empty or oversized batch, or a bad message in it, raises before sending."""
    with pytest.raises(ValueError):
        ctx.publish_batch([])
    with pytest.raises(ValueError):
        ctx.publish_batch([("a.b", b"")] * 1001)
    with pytest.raises(js.BadSubjectError):
        ctx.publish_batch([("good.one", b""), ("bad one", b"")])


def test_required_api_level_is_checked_before_sending(ctx):
    """A request needing a higher API level than the server's INFO fails before sending."""
    with pytest.raises(RequiredApiLevelError) as info:
        ctx._api.request_json("INFO", None, Deadline(2), required_level=99)
    assert info.value.err_code == 10185


def test_server_required_level_error_is_typed(nc):
    """The server's own answer to Nats-Required-Api-Level maps to RequiredApiLevelError."""
    reply = nc.request("$JS.API.INFO", b"", timeout=2, headers={"Nats-Required-Api-Level": "99"})
    with pytest.raises(RequiredApiLevelError):
        check_api_reply(json.loads(reply.data))


def test_api_levels_of_configs():
    """Configs using newer features ask for the API level the server source assigns."""
    from jetstream_sync.jetstream.consumer_admin import consumer_api_level
    from jetstream_sync.jetstream.context import stream_api_level

    assert stream_api_level(js.StreamConfig(name="A")) == 0
    assert stream_api_level(js.StreamConfig(name="A", allow_msg_ttl=True)) == 1
    assert stream_api_level(js.StreamConfig(name="A", allow_atomic=True)) == 2
    assert stream_api_level(js.StreamConfig(name="A", allow_batched=True)) == 4
    assert consumer_api_level(js.ConsumerConfig(durable_name="C")) == 0
    assert (
        consumer_api_level(
            js.ConsumerConfig(
                durable_name="C", priority_groups=["g"], priority_policy="pinned_client"
            )
        )
        == 1
    )
