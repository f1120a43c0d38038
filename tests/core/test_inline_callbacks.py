"""Inline callbacks (``subscribe(..., cb=, inline=True)``): run on the thread that read the
message, in order, against a real server; calls that wait for reads are refused there."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync as js
from jetstream_sync.errors import InlineCallbackError

READING = ("-reader",)  # the reader thread's name ends so: jetstream_sync-<id>-reader


def _reading_threads(nc: js.Client, requester: threading.Thread) -> set[str]:
    """The names of the threads that may read ``nc``: its reader and the requester."""
    return {t.name for t in threading.enumerate() if t.name.endswith(READING)} | {requester.name}


def test_an_inline_responder_answers_on_the_thread_that_read_the_request(nc):
    """No thread of the subscription's own: the request is answered by the reader thread or
    by the requester reading its own reply, and the reply is the responder's."""
    seen = []

    def respond(msg):
        seen.append(threading.current_thread().name)
        msg.respond(msg.data.upper())

    sub = nc.subscribe("inline.svc", cb=respond, inline=True)
    for i in range(200):
        assert nc.request("inline.svc", f"q{i}", timeout=5).data == f"Q{i}".encode()
    assert len(seen) == 200
    assert set(seen) <= _reading_threads(nc, threading.current_thread())
    assert not [t for t in threading.enumerate() if t.name.endswith(f"sub-{sub.sid}")]
    assert sub.pending_msgs == 0 and sub.delivered == 200


def test_inline_calls_come_in_order_before_a_later_flush_returns(nc):
    """Every message published before a flush has had its callback run once the flush returns
    (the PONG comes after them on the wire), in publish order."""
    got = []
    nc.subscribe("inline.order.>", cb=lambda m: got.append(m.data), inline=True)
    for i in range(5000):
        nc.publish(f"inline.order.{i % 7}", b"%d" % i)
    nc.flush(timeout=10)
    assert got == [b"%d" % i for i in range(5000)]


def test_calls_that_wait_for_reads_are_refused_in_an_inline_callback(nc):
    """A request, a flush, next_msg, drain, close, a JetStream publish and a fetch raise
    InlineCallbackError at once (they could only time out); publishing and acks work."""
    jsctx = nc.jetstream()
    stream = jsctx.create_stream(name="INLINEREF", subjects=["inline.ref.js"])
    try:
        jsctx.publish("inline.ref.js", b"stored")
        consumer = stream.create_consumer(durable_name="c")
        other = nc.subscribe("inline.ref.other")
        calls = {
            "request": lambda: nc.request("inline.ref.nobody", b"", timeout=5),
            "flush": lambda: nc.flush(timeout=5),
            "next_msg": lambda: other.next_msg(timeout=5),
            "drain": lambda: nc.drain(timeout=5),
            "sub.drain": lambda: other.drain(timeout=5),
            "close": nc.close,
            "js.publish": lambda: jsctx.publish("inline.ref.js", b"x", timeout=5),
            "fetch": lambda: consumer.fetch(1, timeout=5),
        }
        outcome: dict[str, str] = {}
        done = threading.Event()

        def callback(msg):
            for name, call in calls.items():
                try:
                    call()
                except InlineCallbackError as exc:
                    outcome[name] = str(exc)
                else:
                    outcome[name] = "returned"
            nc.publish("inline.ref.published", b"from the callback")
            msg.respond(b"answered")
            done.set()

        published = nc.subscribe("inline.ref.published")
        nc.subscribe("inline.ref.in", cb=callback, inline=True)
        assert nc.request("inline.ref.in", b"", timeout=10).data == b"answered"
        assert done.wait(10)
        assert set(outcome) == set(calls)
        refused = {name for name, text in outcome.items() if "inline callback" in text}
        assert refused == set(calls), outcome
        assert published.next_msg(timeout=5).data == b"from the callback"
        assert not nc.is_closed and other.is_active
        assert [m.data for m in consumer.fetch(1, timeout=5)] == [b"stored"]
    finally:
        jsctx.delete_stream("INLINEREF")


def test_an_inline_callback_that_raises_is_reported_and_the_next_message_still_comes(
    shared_server,
):
    """The error goes to error_cb (the events thread); the reading goes on."""
    errors = []
    reported = threading.Event()

    def error_cb(exc):
        errors.append(exc)
        reported.set()

    got = []

    def callback(msg):
        if msg.data == b"bad":
            raise RuntimeError("boom")
        got.append(msg.data)

    with js.connect(shared_server.url, error_cb=error_cb) as nc:
        nc.subscribe("inline.raise", cb=callback, inline=True)
        for data in (b"one", b"bad", b"two"):
            nc.publish("inline.raise", data)
        nc.flush(timeout=5)
        assert got == [b"one", b"two"]
        assert reported.wait(5)
        assert [str(e) for e in errors] == ["boom"]


def test_unsubscribe_from_the_inline_callback_stops_it_at_once(nc):
    """Unsubscribing in the callback: no call after it, though more messages were on the wire."""
    calls = []

    def callback(msg):
        calls.append(msg.data)
        if len(calls) == 10:
            sub.unsubscribe()

    sub = nc.subscribe("inline.unsub", cb=callback, inline=True)
    for i in range(100):
        nc.publish("inline.unsub", b"%d" % i)
    nc.flush(timeout=5)
    assert calls == [b"%d" % i for i in range(10)]
    assert not sub.is_active


def test_auto_unsubscribe_limit_holds_for_an_inline_callback(nc):
    """``unsubscribe(limit=5)`` before 20 messages: five calls, then the subscription ends."""
    calls = []
    sub = nc.subscribe("inline.limit", cb=lambda m: calls.append(m.data), inline=True)
    sub.unsubscribe(limit=5)
    for i in range(20):
        nc.publish("inline.limit", b"%d" % i)
    nc.flush(timeout=5)
    assert calls == [b"%d" % i for i in range(5)]
    assert not sub.is_active and sub.delivered == 5


def test_unsubscribe_from_another_thread_waits_for_the_call_in_progress(nc):
    """The callback is never called once unsubscribe() returned, even while a call was under
    way on the reading thread when it began."""
    entered = threading.Event()
    release = threading.Event()
    calls = []

    def callback(msg):
        calls.append(msg.data)
        entered.set()
        release.wait(10)
        calls.append(b"returned")

    sub = nc.subscribe("inline.join", cb=callback, inline=True)
    nc.publish("inline.join", b"1")
    assert entered.wait(10)
    unsubscribed = threading.Event()
    stopper = threading.Thread(target=lambda: (sub.unsubscribe(), unsubscribed.set()))
    stopper.start()
    release.set()
    stopper.join(10)
    assert unsubscribed.is_set()
    assert calls == [b"1", b"returned"]


def test_sixteen_threads_request_an_inline_responder(nc):
    """Requests from 16 threads at once each get their own answer."""
    nc.subscribe("inline.many", cb=lambda m: m.respond(m.data + b"!"), inline=True)
    wrong = []

    def requester(t: int) -> None:
        for i in range(100):
            body = f"{t}.{i}".encode()
            if nc.request("inline.many", body, timeout=10).data != body + b"!":
                wrong.append(body)

    threads = [threading.Thread(target=requester, args=(t,)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_inline_without_a_callback_is_refused_before_anything_is_sent(nc):
    """``inline=True`` names how a callback runs: without ``cb`` it is a ValueError, raised
    before a subscription exists."""
    before = len(nc._connection.subscriptions())
    with pytest.raises(ValueError, match="cb="):
        nc.subscribe("inline.nocb", inline=True)
    assert len(nc._connection.subscriptions()) == before
