"""Batched direct gets through the per-client reply route: raw replies, one queue per request."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import _protocol
from jetstream_sync._deadline import Deadline
from jetstream_sync.jetstream._direct_batch import batch_status, direct_batch_route
from tests.fixtures.server import NatsServer


@pytest.fixture
def stream_options() -> dict[str, Any]:
    """Streams answer direct gets."""
    return {"allow_direct": True}


def _fill(js, name: str, n: int) -> None:
    """n messages ``m1``..: odd sequences on ``<name>.a``, even ones on ``<name>.b.x``."""
    for i in range(1, n + 1):
        js.publish_async(f"{name}.a" if i % 2 else f"{name}.b.x", b"m%d" % i)
    js.publish_async_completed(10)


def _seqs(replies) -> list[int]:
    """The sequences of a batch's replies (its closing status left out)."""
    blocks = [block for _, _, block in replies]
    return _protocol.decode_direct_batch(b"".join(blocks), len(blocks), 1).seqs.tolist()[:-1]


def test_a_batch_is_its_messages_then_a_204(nc, js, stream):
    """The replies are the messages in sequence order, then the end-of-batch status."""
    _fill(js, stream.name, 10)
    route = direct_batch_route(nc)
    replies = route.send(stream, 3, 5, None, Deadline(5)).replies()
    assert [payload for _, payload, _ in replies] == [b"m3", b"m4", b"m5", b"m6", b"m7", b""]
    assert _seqs(replies) == [3, 4, 5, 6, 7]
    assert batch_status(stream, replies[-1][2], Deadline(5)) == 204
    assert route is direct_batch_route(nc)  # one per client


def test_requests_in_flight_together_do_not_mix(nc, js, stream):
    """Each request collects its own replies, whatever order they are collected in."""
    _fill(js, stream.name, 30)
    route = direct_batch_route(nc)
    first = route.send(stream, 1, 10, None, Deadline(5))
    second = route.send(stream, 11, 20, None, Deadline(5))
    assert _seqs(second.replies()) == list(range(11, 31))
    assert _seqs(first.replies()) == list(range(1, 11))


@pytest.mark.parametrize(
    ("subject", "expected"),
    [("{}.a", [1, 3, 5, 7]), ("{}.*", [1, 3, 5, 7]), ("{}.b.*", [2, 4, 6, 8]), ("{}.>", None)],
    ids=["literal", "star", "star-deeper", "gt"],
)
def test_subject_filters(nc, js, stream, subject, expected):
    """A literal, a ``*`` and a ``>`` filter pick the stream's matching messages."""
    _fill(js, stream.name, 8)
    replies = (
        direct_batch_route(nc)
        .send(stream, 1, 100, subject.format(stream.name), Deadline(5))
        .replies()
    )
    assert _seqs(replies) == (expected or list(range(1, 9)))


def test_nothing_to_read_is_a_404(nc, js, stream):
    """A start past the last message: one 404 status reply, which means no messages."""
    _fill(js, stream.name, 3)
    replies = direct_batch_route(nc).send(stream, 10, 5, None, Deadline(5)).replies()
    assert len(replies) == 1
    assert batch_status(stream, replies[0][2], Deadline(5)) == 404


def test_a_stream_without_direct_get_says_so(nc, js, stream_name):
    """Nobody answers (503): batch_status asks the server why."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    replies = direct_batch_route(nc).send(stream, 1, 5, None, Deadline(5)).replies()
    with pytest.raises(jetstream_sync.DirectGetNotAllowedError):
        batch_status(stream, replies[-1][2], Deadline(5))


def test_an_error_status_is_raised(nc, js, stream):
    """Any other status (here a 408 for a bad request) is an APIError with its code."""
    with pytest.raises(jetstream_sync.APIError) as err:
        batch_status(stream, b"NATS/1.0 408 Bad Request\r\n\r\n", Deadline(5))
    assert err.value.code == 408


def test_a_closed_client_fails_the_request_in_flight(
    fault_client, fault_proxy, shared_server, stream_name
):
    """Closing the client wakes a collector with ConnectionClosedError."""
    js = fault_client.jetstream()
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=True)
    try:
        fault_proxy.stall()  # the request gets no answer
        pending = direct_batch_route(fault_client).send(stream, 1, 5, None, Deadline(60))
        fault_client.close()
        with pytest.raises(jetstream_sync.ConnectionClosedError):
            pending.replies()
    finally:
        fault_proxy.resume()
        with jetstream_sync.connect(shared_server.url) as nc:
            nc.jetstream().delete_stream(stream_name)


def test_a_dropped_connection_fails_the_request_in_flight(
    fault_client, fault_proxy, shared_server, stream_name
):
    """A request whose connection drops fails with ConnectionLostError, not at its deadline."""
    js = fault_client.jetstream()
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=True)
    try:
        fault_proxy.stall()
        pending = direct_batch_route(fault_client).send(stream, 1, 5, None, Deadline(60))
        fault_proxy.cut()
        started = time.monotonic()
        with pytest.raises(jetstream_sync.ConnectionLostError):
            pending.replies()
        assert time.monotonic() - started < 30
    finally:
        fault_proxy.resume()
        with jetstream_sync.connect(shared_server.url) as nc:
            nc.jetstream().delete_stream(stream_name)


def test_a_read_stopped_early_leaves_no_request_behind(nc, js, stream):
    """Closing a read_arrow iterator after its first batch drops the direct get in flight."""
    from jetstream_sync.jetstream._arrow_read import ROWS_PER_BATCH

    total = ROWS_PER_BATCH + 5000
    for i in range(total):
        js.publish_async(f"{stream.name}.a", b"m%d" % i)
    js.publish_async_completed(30)
    batches = stream.read_arrow()
    first = next(batches)
    assert first.column("seq").to_pylist() == list(range(1, first.num_rows + 1))
    route = direct_batch_route(nc)
    assert len(route._route._lasting) == 1  # the next request is in flight, its token held
    batches.close()
    assert route._route._lasting == {}


def test_a_status_block_is_told_from_a_message_block():
    """``NATS/1.0`` then a space or a tab and a code is a status; headers or None are not."""
    from jetstream_sync._reply import is_status_block

    assert is_status_block(b"NATS/1.0 204 EOB\r\n\r\n")
    assert is_status_block(b"NATS/1.0\t404 No Messages\r\n\r\n")
    assert not is_status_block(b"NATS/1.0\r\nNats-Sequence: 1\r\n\r\n")
    assert not is_status_block(None)


def test_an_inbox_refused_at_the_subscription_limit_fails_at_once(tmp_path):
    """The server refuses the batches' reply inbox at its max_subscriptions: replies() raises
    MaxSubscriptionsExceededError at once; once there is room the next batch subscribes it
    again and gets its replies."""
    server = NatsServer(directory=tmp_path, extra_config="max_subscriptions: 1").start()
    try:
        with jetstream_sync.connect(server.url) as admin:
            ctx = admin.jetstream()
            stream = ctx.create_stream(name="REFUSED", subjects=["refused.>"], allow_direct=True)
            ctx.publish("refused.a", b"m1")
        with jetstream_sync.connect(server.url) as nc:
            sub = nc.subscribe("refused.other")  # the connection's one subscription
            nc.flush(timeout=5)
            route = direct_batch_route(nc)
            started = time.monotonic()
            with pytest.raises(jetstream_sync.MaxSubscriptionsExceededError, match="reply inbox"):
                route.send(stream, 1, 5, None, Deadline(30)).replies()
            assert time.monotonic() - started < 10
            sub.unsubscribe()
            nc.flush(timeout=5)
            assert _seqs(route.send(stream, 1, 5, None, Deadline(10)).replies()) == [1]
    finally:
        server.stop()
