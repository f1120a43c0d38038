"""Core publish/subscribe against a real nats-server."""

from __future__ import annotations

import contextlib
import sys
import threading

import pytest

import jetstream_sync as js
from jetstream_sync.msg import first_status
from tests.fixtures.polling import wait_for


def test_impl_is_c_unless_asked_otherwise(monkeypatch):
    """The installed package runs on the C protocol core."""
    import os

    expected = os.environ.get("JETSTREAM_SYNC_IMPL", "c")
    assert js.__impl__ == expected


def test_publish_and_receive(nc):
    """A published message reaches a subscriber with subject, data and no headers."""
    sub = nc.subscribe("pubsub.one")
    nc.publish("pubsub.one", b"hello")
    msg = sub.next_msg(timeout=2)
    assert (msg.subject, msg.data, msg.reply) == ("pubsub.one", b"hello", "")
    assert len(msg.headers) == 0
    assert msg.status is None


def test_str_payload_is_utf8(nc):
    """A str payload is sent UTF-8 encoded."""
    sub = nc.subscribe("pubsub.str")
    nc.publish("pubsub.str", "grüße")
    assert sub.next_msg(timeout=2).data == "grüße".encode()


def test_headers_round_trip(nc):
    """Headers keep case, repeated values, spaces and colons in values."""
    sub = nc.subscribe("pubsub.hdr")
    nc.publish("pubsub.hdr", b"x", headers={"Trace-Id": "a b: c", "multi": ["1", "2"], "Empty": ""})
    msg = sub.next_msg(timeout=2)
    assert msg.headers["Trace-Id"] == "a b: c"
    assert msg.headers.get_all("multi") == ["1", "2"]
    assert msg.headers["Empty"] == ""
    assert "trace-id" not in msg.headers


def test_wildcard_subscriptions(nc):
    """'*' matches one token and '>' the rest."""
    star = nc.subscribe("wild.*.end")
    tail = nc.subscribe("wild.>")
    nc.publish("wild.a.end", b"1")
    nc.publish("wild.a.b.c", b"2")
    assert star.next_msg(timeout=2).subject == "wild.a.end"
    got = {tail.next_msg(timeout=2).subject for _ in range(2)}
    assert got == {"wild.a.end", "wild.a.b.c"}
    with pytest.raises(TimeoutError):
        star.next_msg(timeout=0.2)


def test_queue_group_delivers_each_message_once(nc):
    """Members of a queue group share the messages: each arrives exactly once."""
    a = nc.subscribe("work", queue="workers")
    b = nc.subscribe("work", queue="workers")
    for i in range(200):
        nc.publish("work", str(i))
    nc.flush()
    seen = []
    for sub in (a, b):
        while sub.pending_msgs:
            seen.append(int(sub.next_msg(timeout=1).data))
    assert sorted(seen) == list(range(200))


def test_callback_runs_in_order_off_the_reader_thread(nc):
    """A callback subscription runs on its own thread, in arrival order."""
    got, threads, done = [], set(), threading.Event()

    def on_msg(msg):
        got.append(int(msg.data))
        threads.add(threading.current_thread().name)
        if len(got) == 500:
            done.set()

    nc.subscribe("cb.order", cb=on_msg)
    for i in range(500):
        nc.publish("cb.order", str(i))
    assert done.wait(5)
    assert got == list(range(500))
    assert len(threads) == 1 and "reader" not in threads.pop()


@pytest.mark.parametrize(
    ("failure", "inline"), [(RuntimeError, False), (SystemExit, False), (SystemExit, True)]
)
def test_a_callbacks_exception_goes_to_error_cb_and_the_next_message_still_comes(
    shared_server, failure, inline
):
    """An exception raised by a callback, even the SystemExit of sys.exit(), is reported to
    error_cb; it does not end the thread that runs the callbacks (the subscription's, or
    the one reading the socket)."""
    errors, seen = [], []
    nc = js.connect(shared_server.url, error_cb=errors.append)
    try:

        def on_msg(msg):
            seen.append(msg.data)
            if msg.data == b"bad":
                raise failure(3)

        nc.subscribe("cb.err", cb=on_msg, inline=inline)
        for data in (b"bad", b"good"):
            nc.publish("cb.err", data)
        wait_for(lambda: seen == [b"bad", b"good"] and errors)
        assert [type(e) for e in errors] == [failure]
        assert nc.request("$JS.API.INFO", b"", timeout=5)  # the connection is still read
    finally:
        nc.close()


def test_sys_exit_in_error_cb_leaves_the_events_thread_running(shared_server):
    """An error_cb calling sys.exit() is logged; the next error still reaches it."""
    reported = []

    def error_cb(exc):
        reported.append(str(exc))
        sys.exit(1)

    nc = js.connect(shared_server.url, error_cb=error_cb)
    try:

        def on_msg(msg):
            raise RuntimeError(msg.data.decode())

        nc.subscribe("cb.exit.events", cb=on_msg)
        nc.publish("cb.exit.events", b"first")
        nc.publish("cb.exit.events", b"second")
        wait_for(lambda: reported == ["first", "second"])
    finally:
        nc.close()


def test_iterating_a_subscription(nc):
    """Iteration yields messages until the subscription is auto-unsubscribed."""
    sub = nc.subscribe("iter")
    sub.unsubscribe(limit=3)
    for i in range(5):
        nc.publish("iter", str(i))
    assert [m.data for m in sub] == [b"0", b"1", b"2"]
    assert not sub.is_active


def test_unsubscribe_stops_delivery(nc):
    """After unsubscribe nothing more is delivered and next_msg says the subscription ended."""
    sub = nc.subscribe("unsub")
    sub.unsubscribe()
    nc.publish("unsub", b"x")
    nc.flush()
    with pytest.raises(js.NatsError):
        sub.next_msg(timeout=0.2)


def test_unsubscribe_waits_for_a_callback_in_progress_and_never_calls_it_again(nc):
    """From another thread, unsubscribe() returns after the running call; none comes after."""
    entered, release, calls = threading.Event(), threading.Event(), []

    def slow(msg: js.Msg) -> None:
        calls.append(msg.data)
        entered.set()
        release.wait(10)

    sub = nc.subscribe("unsub.busy", cb=slow)
    for i in range(5):
        nc.publish("unsub.busy", str(i))
    assert entered.wait(5)
    returned = threading.Event()
    unsubscriber = threading.Thread(target=lambda: (sub.unsubscribe(), returned.set()))
    unsubscriber.start()
    assert not returned.wait(0.3)  # still inside the callback
    release.set()
    unsubscriber.join(10)
    assert returned.is_set()
    nc.publish("unsub.busy", b"late")
    nc.flush()
    assert calls == [b"0"]  # the pending four were discarded, nothing came after


def test_unsubscribe_from_its_own_callback_returns_at_once(nc):
    """unsubscribe() in the subscription's callback does not wait for that callback."""
    calls, done = [], threading.Event()

    def once(msg: js.Msg) -> None:
        calls.append(msg.data)
        sub.unsubscribe()
        done.set()

    sub = nc.subscribe("unsub.self", cb=once)
    for i in range(3):
        nc.publish("unsub.self", str(i))
    assert done.wait(5)
    nc.flush()
    assert calls == [b"0"] and not sub.is_active


@pytest.mark.parametrize("end", ["unsubscribe", "unsubscribe-inline", "drain", "close"])
def test_two_callbacks_ending_each_others_subscription_do_not_wait_forever(shared_server, end):
    """Callbacks of two subscriptions that unsubscribe (or drain) each other's subscription at
    the same moment (one of them inline: on the reader thread), or one closing the client
    while the other unsubscribes its subscription, both return: neither waits for a
    callback that waits for it."""
    nc = js.connect(shared_server.url)
    both_in = threading.Barrier(2, timeout=5)
    returned = {"a": threading.Event(), "b": threading.Event()}
    subs = {}

    def ending(name: str, other: str):
        def callback(msg: js.Msg) -> None:
            both_in.wait()
            if end == "close" and name == "a":
                nc.close()
            elif end == "drain":
                subs[other].drain(timeout=10)
            else:
                with contextlib.suppress(js.ConnectionClosedError):  # "close": a came first
                    subs[other].unsubscribe()
            returned[name].set()

        return callback

    subs["a"] = nc.subscribe("mutual.a", cb=ending("a", "b"))
    subs["b"] = nc.subscribe("mutual.b", cb=ending("b", "a"), inline=end == "unsubscribe-inline")
    nc.publish("mutual.a", b"")
    nc.flush()  # a is read before b, whose inline callback holds the reader thread
    nc.publish("mutual.b", b"")
    try:
        assert returned["a"].wait(10) and returned["b"].wait(10)
    finally:
        both_in.abort()
    nc.close()
    assert not subs["a"].is_active and not subs["b"].is_active


def test_subscription_drain_delivers_pending_to_callback(nc):
    """drain() returns after the callback handled every message already sent."""
    got = []
    sub = nc.subscribe("drain.sub", cb=lambda m: got.append(m.data))
    for i in range(100):
        nc.publish("drain.sub", str(i))
    sub.drain(timeout=5)
    assert len(got) == 100
    nc.publish("drain.sub", b"late")
    nc.flush()
    assert len(got) == 100


def test_next_msg_timeout_is_builtin_timeout(nc):
    """next_msg raises a TimeoutError that is also the builtin one."""
    sub = nc.subscribe("quiet")
    with pytest.raises(TimeoutError) as info:
        sub.next_msg(timeout=0.1)
    assert isinstance(info.value, js.TimeoutError)


def test_slow_consumer_is_reported_not_silent(shared_server):
    """Overflowing pending_msgs_limit reports SlowConsumerError to error_cb."""
    errors = []
    nc = js.connect(shared_server.url, error_cb=errors.append)
    try:
        sub = nc.subscribe("slow", pending_msgs_limit=10)
        for _ in range(50):
            nc.publish("slow", b"x")
        nc.flush()
        wait_for(lambda: errors, message="no slow consumer error")
        assert isinstance(errors[0], js.SlowConsumerError)
        assert errors[0].sid == sub.sid
        assert sub.pending_msgs == 10
    finally:
        nc.close()


def test_large_payload_up_to_max_payload(nc):
    """A payload of exactly max_payload bytes goes through whole."""
    data = bytes(range(256)) * (nc.max_payload // 256)
    sub = nc.subscribe("big")
    nc.publish("big", data)
    assert sub.next_msg(timeout=5).data == data


def test_stats_count_messages(nc):
    """stats counts messages in and out."""
    sub = nc.subscribe("stats")
    for _ in range(10):
        nc.publish("stats", b"12345")
    for _ in range(10):
        sub.next_msg(timeout=2)
    stats = nc.stats
    assert stats.out_msgs >= 10 and stats.in_msgs >= 10
    assert stats.out_bytes > 50 and stats.in_bytes >= 50


def test_no_echo(shared_server):
    """With no_echo a client does not receive its own messages."""
    with js.connect(shared_server.url, no_echo=True) as nc:
        sub = nc.subscribe("echo")
        nc.publish("echo", b"x")
        nc.flush()
        with pytest.raises(TimeoutError):
            sub.next_msg(timeout=0.2)


def test_new_inbox_is_unique_and_prefixed(shared_server):
    """Inboxes use inbox_prefix and never repeat."""
    with js.connect(shared_server.url, inbox_prefix="_MY") as nc:
        inboxes = {nc.new_inbox() for _ in range(1000)}
        assert len(inboxes) == 1000
        assert all(i.startswith("_MY.") for i in inboxes)


def test_next_msgs_takes_a_batch(nc):
    """next_msgs waits for the first message, then returns up to max_msgs at once."""
    sub = nc.subscribe("batch.take")
    for i in range(10):
        nc.publish("batch.take", b"%d" % i)
    nc.flush()
    first = sub.next_msgs(max_msgs=4, timeout=2)
    rest = sub.next_msgs(max_msgs=100, timeout=2)
    assert [m.data for m in first + rest] == [b"%d" % i for i in range(10)]
    assert len(first) == 4
    with pytest.raises(TimeoutError):
        sub.next_msgs(timeout=0.1)
    sub.unsubscribe()
    assert sub.next_msgs(timeout=0.1) == []


def _server_sub_count(server, name: str) -> int:
    """How many subscriptions the server holds for the connection named ``name``."""
    conns = server.monitor("connz", subs=1)["connections"]
    return sum(c.get("num_subscriptions", 0) for c in conns if c.get("name") == name)


@pytest.mark.parametrize(
    ("point", "limit"),
    [(0, 1), (0, 5000), (1, 10), (500, 501), (2000, 2500), (4000, 3000), (9000, 10000), (10000, 7)],
)
def test_unsubscribe_limit_racing_deliveries_never_passes_the_limit(shared_server, point, limit):
    """unsubscribe(limit) racing a 10,000-message burst delivers exactly the first ``limit``."""
    total = 10_000
    name = f"race-{point}-{limit}"
    with js.connect(shared_server.url, name=name) as nc, js.connect(shared_server.url) as pub:
        sub = nc.subscribe("race")
        nc.flush()
        done = threading.Event()

        def limiter():
            try:
                wait_for(lambda: sub.delivered >= point, timeout=10, interval=0.0005)
                sub.unsubscribe(limit=limit)
            finally:
                done.set()

        thread = threading.Thread(target=limiter)
        thread.start()
        try:
            for i in range(total):
                pub.publish("race", b"%d" % i)
            pub.flush()
            assert done.wait(15)
        finally:
            thread.join()
        got = [m.data for m in sub]  # ends when the subscription has ended
        assert got == [b"%d" % i for i in range(limit)]
        assert not sub.is_active
        assert sub.sid not in nc._connection._subs.sids()
        pub.publish("race", b"late")
        pub.flush()
        wait_for(lambda: _server_sub_count(shared_server, name) == 0)
        assert sub.pending_msgs == 0


def test_unsubscribe_limit_after_some_were_taken(nc):
    """With more received than the limit, only what completes the limit (with those taken) stays."""
    sub = nc.subscribe("taken")
    for i in range(10):
        nc.publish("taken", b"%d" % i)
    nc.flush()
    wait_for(lambda: sub.pending_msgs == 10)
    assert [sub.next_msg().data for _ in range(3)] == [b"0", b"1", b"2"]
    sub.unsubscribe(limit=5)
    assert [m.data for m in sub] == [b"3", b"4"]
    sub2 = nc.subscribe("taken2")
    for i in range(4):
        nc.publish("taken2", b"%d" % i)
    nc.flush()
    wait_for(lambda: sub2.pending_msgs == 4)
    sub2.next_msgs(10)
    sub2.unsubscribe(limit=2)  # already took more than the limit: nothing more
    assert list(sub2) == []


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
def test_unsubscribe_limit_must_be_a_positive_int(nc, limit):
    """A bad limit raises ValueError before anything is sent; the subscription goes on."""
    sub = nc.subscribe("badlimit")
    with pytest.raises(ValueError):
        sub.unsubscribe(limit=limit)
    nc.publish("badlimit", b"x")
    assert sub.next_msg(timeout=2).data == b"x"


def test_unsubscribe_limit_up_to_the_servers_999_999_999(nc):
    """A limit of 999,999,999 is kept by the server; one of ten digits, which
    nats-server reads as no number and ends the subscription on at once, raises
    ValueError and the subscription goes on."""
    sub = nc.subscribe("biglimit")
    sub.unsubscribe(limit=999_999_999)
    other = nc.subscribe("biglimit")
    with pytest.raises(ValueError, match="999,999,999"):
        other.unsubscribe(limit=1_000_000_000)
    nc.publish("biglimit", b"x")
    assert sub.next_msg(timeout=2).data == b"x"
    assert other.next_msg(timeout=2).data == b"x"


def test_interrupt_wakes_a_blocked_next_msgs(nc):
    """interrupt() makes a next_msgs blocked without a timeout return [] while still active."""
    sub = nc.subscribe("intr")
    got = []
    thread = threading.Thread(target=lambda: got.append(sub.next_msgs(10, timeout=None)))
    thread.start()
    try:
        wait_for(lambda: thread.is_alive())
        sub.interrupt()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        if thread.is_alive():
            sub.unsubscribe()
            thread.join()
    assert got == [[]] and sub.is_active
    sub.interrupt()  # nobody waiting: the next call returns at once
    assert sub.next_msgs(10, timeout=30) == []
    nc.publish("intr", b"a")
    nc.flush()
    wait_for(lambda: sub.pending_msgs == 1)
    sub.interrupt()  # pending messages are returned, not hidden
    assert [m.data for m in sub.next_msgs(10, timeout=5)] == [b"a"]
    with pytest.raises(js.TimeoutError):
        sub.next_msgs(10, timeout=0.05)  # the interrupt was used up


def test_msg_status_accessors(nc):
    """is_status, first_status and header_size tell statuses and header sizes without parsing."""
    sub = nc.subscribe("acc")
    nc.publish("acc", b"plain")
    nc.publish("acc", b"h", headers={"K": "v"})
    first, second = sub.next_msg(2), sub.next_msg(2)
    assert not first.is_status and first.header_size == 0 and not first.is_acked
    assert not second.is_status and second.header_size == len(b"NATS/1.0\r\nK: v\r\n\r\n")
    status = js.Msg("x", "", b"", b"NATS/1.0 503\r\n\r\n")
    assert status.is_status and status.status == 503
    batch = [first, status, second, status]
    assert [first_status(batch), first_status(batch, 2), first_status(batch[2:3])] == [1, 3, 1]
