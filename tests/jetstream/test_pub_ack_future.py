"""PubAckFuture is a concurrent.futures.Future: wait, as_completed, callbacks and cancel."""

from __future__ import annotations

import concurrent.futures
import functools
import sys
import threading

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for
from tests.fixtures.threads import in_thread, run_in_threads

ACK = b'{"stream":"MANUAL","seq":7}'


@pytest.fixture
def manual(nc):
    """``(ctx, stand_in)``: publishes to ``manual.ack`` are acked only when the test says so."""
    stand_in = nc.subscribe("manual.ack")
    nc.flush()
    return nc.jetstream(ack_timeout=30), stand_in


def test_is_a_future(js, stream):
    """publish_async returns a concurrent.futures.Future resolving to a PubAck."""
    future = js.publish_async(f"{stream.name}.a", b"x")
    assert isinstance(future, concurrent.futures.Future)
    ack = future.result(timeout=5)
    assert (ack.stream, ack.seq) == (stream.name, 1)
    assert future.result() is ack  # parsed once
    assert future.exception() is None and future.done() and not future.running()


def test_wait_all_completed(js, stream):
    """concurrent.futures.wait returns every future done."""
    futures = [js.publish_async(f"{stream.name}.w", b"%d" % i) for i in range(200)]
    done, not_done = concurrent.futures.wait(futures, timeout=10)
    assert len(done) == 200 and not not_done
    assert sorted(f.result().seq for f in done) == list(range(1, 201))


def test_wait_first_exception(js, stream):
    """wait(FIRST_EXCEPTION) returns once a publish fails."""
    ok = js.publish_async(f"{stream.name}.ok", b"x")
    ok.result(timeout=5)
    bad = js.publish_async(f"{stream.name}.bad", b"x", expected_last_seq=99)
    done, _ = concurrent.futures.wait(
        [ok, bad], timeout=10, return_when=concurrent.futures.FIRST_EXCEPTION
    )
    assert bad in done
    assert isinstance(bad.exception(), jetstream_sync.WrongLastSequenceError)


def test_wait_first_completed_on_a_pending_future(manual):
    """wait(FIRST_COMPLETED) blocks on a pending future and wakes when its ack comes."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    done, not_done = concurrent.futures.wait([future], timeout=0.05)
    assert not done and not_done == {future}
    stand_in.next_msg(timeout=5).respond(ACK)
    done, _ = concurrent.futures.wait(
        [future], timeout=10, return_when=concurrent.futures.FIRST_COMPLETED
    )
    assert done == {future} and future.result().seq == 7


def test_as_completed_yields_each_once(js, stream):
    """as_completed yields every future exactly once."""
    futures = [js.publish_async(f"{stream.name}.c", b"x") for _ in range(100)]
    seen = list(concurrent.futures.as_completed(futures, timeout=10))
    assert len(seen) == 100 and set(seen) == set(futures)


def test_done_callback_before_and_after_completion(manual):
    """A callback added while pending runs on the ack thread; one added afterwards runs at once."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    called = []
    ran = threading.Event()

    def early(f):
        called.append(("early", threading.current_thread().name, f.result().seq))
        ran.set()

    future.add_done_callback(early)
    assert not called
    stand_in.next_msg(timeout=5).respond(ACK)
    assert ran.wait(5)
    future.add_done_callback(
        lambda f: called.append(("late", threading.current_thread().name, f.result().seq))
    )
    assert called == [
        ("early", "jetstream_sync-acks", 7),
        ("late", threading.current_thread().name, 7),
    ]


def test_done_callback_added_after_an_unwatched_completion(js, stream):
    """A future resolved while nobody watched still runs a callback added later, at once."""
    future = js.publish_async(f"{stream.name}.late", b"x")
    js.publish_async_completed(timeout=5)
    got = []
    future.add_done_callback(lambda f: got.append(f.result().seq))
    assert got == [1]
    assert concurrent.futures.wait([future], timeout=0.01).done == {future}


async def _async_callback(future):
    """A coroutine function: the ack thread would never await it."""


@pytest.mark.parametrize("callback", ["callback", _async_callback])
def test_a_done_callback_it_cannot_call_is_refused(js, stream, callback):
    """add_done_callback raises TypeError naming fn, pending or done, and keeps nothing."""
    future = js.publish_async(f"{stream.name}.cb", b"x")
    with pytest.raises(TypeError, match="^fn must be"):
        future.add_done_callback(callback)
    future.result(timeout=5)
    with pytest.raises(TypeError, match="^fn must be"):
        future.add_done_callback(callback)


def test_a_thread_that_finds_the_future_made_real_under_it_still_reads_it(manual):
    """A thread whose first use of a future is overtaken by another thread's (which
    makes its Future state in between) still gets that state, not an AttributeError."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    entered, overtaken = threading.Event(), threading.Event()
    ran: list[str] = []

    def pause_in_getattr(frame, event, _arg):
        # Hold this thread at the future's first missing attribute until the other
        # thread has used the future: the window two threads can meet in.
        if event == "call" and frame.f_code is type(future).__getattr__.__code__:
            entered.set()
            overtaken.wait(10)
        return None

    def add_late() -> None:
        sys.settrace(pause_in_getattr)
        try:
            future.add_done_callback(lambda f: ran.append("late"))
        finally:
            sys.settrace(None)

    thread, outcome = in_thread(add_late)
    assert entered.wait(10)
    future.add_done_callback(lambda f: ran.append("early"))
    overtaken.set()
    thread.join(10)
    assert not thread.is_alive() and outcome == [None], outcome
    stand_in.next_msg(timeout=5).respond(ACK)
    wait_for(lambda: sorted(ran) == ["early", "late"], message=f"ran {ran}")


def test_done_callbacks_added_from_16_threads_each_run_once(js, stream):
    """16 threads adding done-callbacks to the same 2,000 futures while their acks
    arrive: no call fails (the first use of a future from two threads at once), and
    every callback runs exactly once."""
    futures = [js.publish_async(f"{stream.name}.many", b"x") for _ in range(2000)]
    counts = [0] * len(futures)
    lock = threading.Lock()

    def count(i: int, _future) -> None:
        with lock:
            counts[i] += 1

    def add_all(_n: int) -> None:
        for i, future in enumerate(futures):
            future.add_done_callback(functools.partial(count, i))

    assert run_in_threads(add_all, 16) == []
    js.publish_async_completed(timeout=30)
    wait_for(lambda: sum(counts) == 16 * len(futures), message=f"ran {sum(counts)}")
    assert set(counts) == {16}


def test_cancel_is_refused(manual):
    """cancel() is False while pending and once done; the future still resolves."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    assert future.running() and not future.done()
    assert future.cancel() is False
    assert not future.cancelled() and future.running()
    stand_in.next_msg(timeout=5).respond(ACK)
    assert future.result(timeout=5).seq == 7
    assert future.cancel() is False and not future.cancelled() and not future.running()


def test_result_timeout_is_the_builtin_timeout(manual):
    """result(timeout) on a pending future raises TimeoutError and the future stays usable."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    with pytest.raises(TimeoutError):
        future.result(timeout=0.05)
    with pytest.raises(TimeoutError):
        future.exception(timeout=0.05)
    stand_in.next_msg(timeout=5).respond(ACK)
    assert future.result(timeout=5).seq == 7


def test_error_reply_fails_the_future(manual):
    """An error PubAck fails the future with the matching APIError subclass."""
    ctx, stand_in = manual
    future = ctx.publish_async("manual.ack", b"x")
    stand_in.next_msg(timeout=5).respond(
        b'{"stream":"MANUAL","seq":0,"error":{"code":400,"err_code":10071,'
        b'"description":"wrong last sequence: 3"}}'
    )
    with pytest.raises(jetstream_sync.WrongLastSequenceError):
        future.result(timeout=5)


def test_a_done_callback_waiting_for_another_ack_is_refused_at_once(
    shared_server, manual, js, stream
):
    """A done-callback runs on the ack thread, which settles the futures waited on: waiting
    there for a pending future could only time out, so it raises InlineCallbackError at
    once. Its own (done) future reads fine, and a future of another client, settled by
    that client's ack thread, can be waited for."""
    ctx, stand_in = manual
    seen: dict[str, object] = {}
    ran = threading.Event()

    with jetstream_sync.connect(shared_server.url) as other:
        other_js = other.jetstream()

        def on_ack(future):
            seen["own"] = future.result().seq
            for name, publisher in (("same", js), ("other", other_js)):
                try:
                    seen[name] = publisher.publish_async(f"{stream.name}.{name}", b"2").result(10)
                except Exception as exc:
                    seen[name] = exc
            ran.set()

        # The ack comes only once the callback is added: it then runs on the ack thread.
        ctx.publish_async("manual.ack", b"1").add_done_callback(on_ack)
        stand_in.next_msg(timeout=5).respond(ACK)
        assert ran.wait(30)
    assert seen["own"] == 7
    assert isinstance(seen["same"], jetstream_sync.InlineCallbackError), seen
    assert "done-callback" in str(seen["same"])
    assert isinstance(seen["other"], jetstream_sync.PubAck), seen
    assert js.publish_async(f"{stream.name}.after", b"3").result(10).seq == 3


def test_a_done_callback_calling_sys_exit_leaves_the_ack_thread_running(manual):
    """SystemExit from a done-callback on the ack thread is logged; later futures still settle."""
    ctx, stand_in = manual
    # Each ack comes only once the callback is added: it then runs on the ack thread.
    first = ctx.publish_async("manual.ack", b"x")
    first.add_done_callback(lambda f: sys.exit(1))
    stand_in.next_msg(timeout=5).respond(ACK)
    assert first.result(timeout=5).seq == 7
    later = threading.Event()
    second = ctx.publish_async("manual.ack", b"y")
    second.add_done_callback(lambda f: later.set())
    stand_in.next_msg(timeout=5).respond(ACK)
    assert later.wait(5)
