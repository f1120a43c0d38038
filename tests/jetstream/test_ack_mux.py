"""One async-ack multiplexer per client, shared by every context; each context keeps its window."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import jetstream_sync as js
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import interrupted_at, taken_by_another_thread

ACK_THREADS = ("jetstream_sync-acks", "jetstream_sync-ack-timer")


@pytest.fixture
def ack_threads() -> Callable[[], list[threading.Thread]]:
    """Lists the ack threads started since the test began: only those are the test's (a
    client another test keeps open, such as a cached Spark client, may have its own)."""
    before = set(threading.enumerate())
    return lambda: [t for t in threading.enumerate() if t.name in ACK_THREADS and t not in before]


def _subscriptions(server, name: str) -> int:
    """How many subscriptions the server holds for the connection called ``name``."""
    conns = server.monitor("connz", subs=True)["connections"]
    return sum(c["subscriptions"] for c in conns if c.get("name") == name)


@pytest.fixture
def stream(shared_server):
    """A fresh stream capturing ``<name>.>``, deleted afterwards."""
    name = unique_stream_name("ACKMUX")
    with js.connect(shared_server.url) as admin:
        ctx = admin.jetstream()
        ctx.create_stream(name=name, subjects=[f"{name}.>"])
        yield name
        ctx.delete_stream(name)


def test_fifty_contexts_share_one_mux(shared_server, stream, ack_threads):
    """50 contexts publishing async add no thread and no subscription after the first."""
    name = unique_stream_name("mux-client")
    with js.connect(shared_server.url, name=name) as nc:
        first = nc.jetstream()
        first.publish_async(f"{stream}.first", b"x").result(timeout=10)
        threads = len(ack_threads())
        subs = _subscriptions(shared_server, name)
        assert threads <= 2 and subs == 1  # the ack inbox; the timer may come and go
        contexts = [nc.jetstream() for _ in range(50)]
        futures = [ctx.publish_async(f"{stream}.c{i}", b"x") for i, ctx in enumerate(contexts)]
        for ctx in contexts:
            ctx.publish_async_completed(timeout=10)
            assert ctx.publish_async_pending() == 0
        assert sorted(f.result().seq for f in futures) == list(range(2, 52))
        assert len(ack_threads()) <= 2
        assert _subscriptions(shared_server, name) == subs
    wait_for(lambda: not ack_threads(), message="ack threads outlived close()")


def test_windows_and_ack_timeouts_are_per_context(nc, stream):
    """A context with a full window or a short ack_timeout does not affect another."""
    hole = nc.subscribe("hole.>")  # receives the messages, never acks them
    nc.flush()
    patient = nc.jetstream(ack_timeout=60)
    hasty = nc.jetstream(ack_timeout=2, max_ack_inflight=2, backpressure_on_inflight=False)
    busy = nc.jetstream(max_ack_inflight=10)
    waiting = patient.publish_async("hole.patient", b"x")  # first in, longest timeout
    lost = [hasty.publish_async("hole.hasty", b"x") for _ in range(2)]
    with pytest.raises(js.TooManyPendingAcksError):
        hasty.publish_async("hole.hasty", b"x")
    # another context's window is untouched by the full one, and drains on its own
    stored = [busy.publish_async(f"{stream}.busy", b"x") for _ in range(100)]
    busy.publish_async_completed(timeout=10)
    assert [f.result().seq for f in stored] == list(range(1, 101))
    # the short timeout fires although a longer one was published before it
    for future in lost:
        assert isinstance(future.exception(timeout=10), js.TimeoutError)
    assert hasty.publish_async_pending() == 0
    assert not waiting.done() and patient.publish_async_pending() == 1
    assert len(hole.next_msgs(10, timeout=5)) >= 1


def test_backpressure_blocks_only_its_own_context(nc, stream):
    """A context blocked on its full window times out; another context publishes meanwhile."""
    nc.subscribe("hole2.>")
    nc.flush()
    full = nc.jetstream(max_ack_inflight=1, ack_timeout=60)
    other = nc.jetstream()
    full.publish_async("hole2.x", b"x")
    blocked = threading.Event()
    outcome: list[BaseException] = []

    def publish_into_full_window():
        blocked.set()
        try:
            full.publish_async("hole2.x", b"x", timeout=1)
        except BaseException as exc:  # checked below
            outcome.append(exc)

    thread = threading.Thread(target=publish_into_full_window)
    thread.start()
    assert blocked.wait(5)
    assert other.publish_async(f"{stream}.free", b"x").result(timeout=5).seq == 1
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], js.TimeoutError)


def test_disconnect_fails_every_context_pending_future(restartable_server):
    """A disconnect fails the pending futures of every context with ConnectionLostError."""
    nc = js.connect(restartable_server.url, reconnect_time_wait=0.1)
    try:
        nc.subscribe("never.acked")
        nc.flush()
        contexts = [nc.jetstream(ack_timeout=60) for _ in range(3)]
        futures = [ctx.publish_async("never.acked", b"x") for ctx in contexts for _ in range(5)]
        restartable_server.restart()
        for future in futures:
            assert isinstance(future.exception(timeout=15), js.ConnectionLostError)
        assert all(ctx.publish_async_pending() == 0 for ctx in contexts)
        wait_for(lambda: nc.is_connected, timeout=15)
        sub = nc.subscribe("after.reconnect")
        contexts[0].publish_async("after.reconnect", b"x")
        assert sub.next_msg(timeout=5).data == b"x"  # the mux carries on
    finally:
        nc.close()


def test_close_fails_pending_futures_of_every_context(shared_server, ack_threads):
    """close() fails every context's pending futures with ConnectionClosedError and joins."""
    nc = js.connect(shared_server.url)
    nc.subscribe("never.acked.3")
    nc.flush()
    futures = [nc.jetstream(ack_timeout=60).publish_async("never.acked.3", b"x") for _ in range(4)]
    nc.close()
    for future in futures:
        assert isinstance(future.exception(timeout=5), js.ConnectionClosedError)
    wait_for(lambda: not ack_threads(), message="ack threads outlived close()")


def test_status_and_error_acks_fail_their_future(nc, stream):
    """A 503 status (a header, no body) and an error body fail their futures with typed errors."""
    ctx = nc.jetstream()
    nobody = ctx.publish_async("nobody.listens.here", b"x")
    assert isinstance(nobody.exception(timeout=10), js.NoRespondersError)
    ctx.publish(f"{stream}.m", b"1", msg_id="a")
    wrong = ctx.publish_async(f"{stream}.m", b"2", expected_last_msg_id="zzz")
    assert isinstance(wrong.exception(timeout=10), js.WrongLastMsgIdError)
    assert ctx.publish_async(f"{stream}.m", b"3").result(timeout=10).seq == 2


def test_acks_arrive_after_a_reconnect(restartable_server):
    """After a reconnect the ack inbox is routed again: a new publish gets its PubAck."""
    nc = js.connect(restartable_server.url, reconnect_time_wait=0.1)
    try:
        nc.subscribe("fake.stream.>", cb=lambda m: m.respond(b'{"stream":"FAKE","seq":7}'))
        nc.flush()
        ctx = nc.jetstream()
        assert ctx.publish_async("fake.stream.a", b"x").result(timeout=10).seq == 7
        restartable_server.restart()
        wait_for(lambda: nc.is_connected, timeout=15)
        nc.flush(timeout=5)  # the SUB frames sent on the new connection have been processed
        ack = ctx.publish_async("fake.stream.b", b"x").result(timeout=10)
        assert (ack.stream, ack.seq) == ("FAKE", 7)
    finally:
        nc.close()


def test_publish_routed_sends_the_numbered_reply_and_checks_its_input(nc):
    """publish_routed: reply <prefix><token> reaches the route; bad input raises, sends nothing."""
    got: list[list[tuple[str, bytes, bytes | None]]] = []
    arrived = threading.Event()

    def handler(replies: list[tuple[str, bytes, bytes | None]]) -> None:
        got.append(replies)
        arrived.set()

    prefix = nc.add_reply_route(handler)
    sub = nc.subscribe("routed.x")
    nc.publish_routed("routed.x", b"payload", prefix, 42, 1.0)
    msg = sub.next_msg(timeout=5)
    assert (msg.data, msg.reply) == (b"payload", f"{prefix}42")
    msg.respond(b"answer")
    assert arrived.wait(5)
    assert got == [[("42", b"answer", None)]]
    big = bytes(range(256)) * 300  # joined into its frame, not %-formatted
    nc.publish_routed("routed.x", big, prefix, 7, 1.0)
    msg = sub.next_msg(timeout=5)
    assert (msg.data, msg.reply) == (big, f"{prefix}7")
    with pytest.raises(ValueError, match="reply route"):
        nc.publish_routed("routed.x", b"x", "_INBOX.made.up.", 1, 1.0)
    with pytest.raises(js.BadSubjectError):
        nc.publish_routed("routed.*", b"x", prefix, 1, 1.0)
    with pytest.raises(js.MaxPayloadError):
        nc.publish_routed("routed.x", b"x" * (nc.max_payload + 1), prefix, 1, 1.0)
    nc.flush()
    assert sub.pending_msgs == 0  # nothing of the refused ones was sent


def test_a_publish_waiting_for_room_interrupted_at_any_point_leaves_the_window_usable(nc, stream):
    """Ctrl-C at each point in turn of an async publish waiting for room in a full window
    (on the main thread): the window's lock is never left held nor released twice, and
    acks keep settling (the reader thread takes that lock for each)."""
    nc.subscribe("hole3.>")  # takes the messages and answers none: no ack comes
    nc.flush()
    full = nc.jetstream(max_ack_inflight=1, ack_timeout=60)
    other = nc.jetstream()
    full.publish_async("hole3.x", b"x")
    point = 0
    while True:
        point += 1
        try:
            if not interrupted_at(point, lambda: full.publish_async("hole3.x", b"x", timeout=0.05)):
                raise AssertionError("a publish into a full window returned")
        except js.TimeoutError:
            break  # the wait ran to its deadline: every point before it was tried
        assert taken_by_another_thread(full._async._lock), f"left held at point {point}"
        assert other.publish_async(f"{stream}.free", b"x").result(timeout=10).seq == point
    assert point > 5
    assert full.publish_async_pending() == 1
