"""close() called from any of the client's own threads returns, and no thread is left running."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync as js
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.leaks import LeakCheck
from tests.fixtures.polling import wait_for

ACK = b'{"stream":"MANUAL","seq":1}'


class Closer:
    """A callback that closes the client, recording the thread it ran on."""

    def __init__(self) -> None:
        """Nothing called yet."""
        self.client: js.Client | None = None
        self.thread_name: str | None = None
        self.returned = threading.Event()

    def __call__(self, *_args: object) -> None:
        """Close the client (once), then mark the callback as returned."""
        if self.thread_name is not None:
            return
        self.thread_name = threading.current_thread().name
        self.client.close()
        self.returned.set()


@pytest.fixture
def baseline(shared_server) -> Iterator[Callable[[], None]]:
    """``check()`` waits until only the threads running before the test are left."""
    responder = js.connect(shared_server.url)  # made first: its threads are in the baseline
    threads = LeakCheck(thread_prefixes=("jetstream_sync-",))

    def check() -> None:
        left = threads.leaks(grace=5.0).threads
        assert left == [], f"threads left: {left}"

    check.responder = responder
    yield check
    responder.close()


def _finish(closer: Closer, nc: js.Client, check: Callable[[], None], thread: str) -> None:
    """The callback returned on the expected thread, the client is closed, no thread is left."""
    assert closer.returned.wait(10), "close() did not return in the callback"
    assert thread in closer.thread_name, closer.thread_name
    assert nc.is_closed
    check()


def test_close_from_a_done_callback_on_the_ack_thread(shared_server, baseline):
    """A PubAckFuture done-callback running on the ack thread may close the client."""
    closer = Closer()
    nc = closer.client = js.connect(shared_server.url)
    stand_in = baseline.responder.subscribe("manual.ack")  # acks by hand, when told to
    baseline.responder.flush()
    future = nc.jetstream().publish_async("manual.ack", b"x")
    future.add_done_callback(closer)
    stand_in.next_msg(timeout=5).respond(ACK)
    _finish(closer, nc, baseline, "jetstream_sync-acks")
    assert future.result().seq == 1


def test_close_from_a_done_callback_on_the_timer_thread(shared_server, baseline):
    """A done-callback of a future failed by ack_timeout (timer thread) may close the client."""
    closer = Closer()
    nc = closer.client = js.connect(shared_server.url)
    baseline.responder.subscribe("manual.never")
    baseline.responder.flush()
    # The callback must be added before the timer fails the future (else it runs here, on
    # the adding thread): 1 s leaves room for a loaded machine between these two lines.
    future = nc.jetstream(ack_timeout=1.0).publish_async("manual.never", b"x")
    future.add_done_callback(closer)
    _finish(closer, nc, baseline, "jetstream_sync-ack-timer")
    assert isinstance(future.exception(), js.TimeoutError)


def test_close_from_a_subscription_callback(shared_server, baseline):
    """A subscription callback (its worker thread) may close the client."""
    closer = Closer()
    nc = closer.client = js.connect(shared_server.url)
    nc.subscribe("close.me", cb=closer)
    nc.jetstream().publish_async("close.me", b"x")  # never acked: pending when closed
    _finish(closer, nc, baseline, "jetstream_sync-sub-")


def test_close_from_error_cb(shared_server, baseline):
    """error_cb (the events thread) may close the client."""
    closer = Closer()
    nc = closer.client = js.connect(shared_server.url, error_cb=closer)

    def fail(msg):
        raise RuntimeError("boom")  # reported to error_cb

    nc.subscribe("close.err", cb=fail)
    nc.jetstream().publish_async("close.err", b"x")  # never acked: pending when closed
    _finish(closer, nc, baseline, "-events")


def test_close_from_a_callback_while_error_cb_unsubscribes_its_subscription(
    shared_server, baseline
):
    """A subscription callback closing the client while error_cb (the events thread, which
    close() joins) waits in unsubscribe() for that callback: both return, no thread is left."""
    callback_in = threading.Event()
    unsubscribed = threading.Event()
    subs = {}

    def on_error(exc: BaseException) -> None:
        if isinstance(exc, RuntimeError):
            callback_in.wait(5)
            subs["closing"].unsubscribe()  # waits for close_once_unsubscribed to return
            unsubscribed.set()

    closer = Closer()
    nc = closer.client = js.connect(shared_server.url, error_cb=on_error)

    def close_once_unsubscribed(msg: js.Msg) -> None:
        callback_in.set()
        wait_for(lambda: not subs["closing"].is_active)  # error_cb is in unsubscribe()
        closer(msg)

    def fail(msg: js.Msg) -> None:
        raise RuntimeError("boom")  # reported to error_cb

    subs["closing"] = nc.subscribe("close.cycle", cb=close_once_unsubscribed)
    nc.subscribe("close.fail", cb=fail)
    nc.publish("close.cycle", b"")
    nc.publish("close.fail", b"")
    _finish(closer, nc, baseline, "jetstream_sync-sub-")
    assert unsubscribed.wait(10), "error_cb's unsubscribe() did not return"


def test_close_from_disconnected_cb(restartable_server):
    """disconnected_cb (the events thread) may close the client while acks are pending."""
    threads = LeakCheck(thread_prefixes=("jetstream_sync-",))
    closer = Closer()
    nc = closer.client = js.connect(restartable_server.url, disconnected_cb=closer)
    nc.subscribe("never.acked")
    nc.flush()
    future = nc.jetstream(ack_timeout=60).publish_async("never.acked", b"x")
    restartable_server.kill()
    assert closer.returned.wait(10)
    assert nc.is_closed
    # disconnected_cb runs before the ack machinery hears of the disconnect: close() came first
    assert isinstance(future.exception(timeout=5), js.ConnectionClosedError)
    assert threads.leaks(grace=5.0).threads == []


def test_close_from_a_consume_callback(shared_server, baseline):
    """A consume() callback (its own thread) may close the client; that thread ends too."""
    closer = Closer()
    nc = closer.client = js.connect(shared_server.url)
    name = unique_stream_name("CLOSECB")
    admin = baseline.responder.jetstream()
    stream = admin.create_stream(name=name, subjects=[f"{name}.>"])
    try:
        admin.publish(f"{name}.x", b"x")
        nc.jetstream().stream_no_info(name).create_consumer(durable_name="d").consume(closer)
        _finish(closer, nc, baseline, "jetstream_sync-consume-")
    finally:
        admin.delete_stream(stream.name)


# A signal handler that closes the client which the main thread is in the middle
# of using; run in a child process so that a deadlock fails the test instead of
# hanging the suite.
_CLOSE_IN_HANDLER = """
import signal, sys, threading
import jetstream_sync as js

url, loop = sys.argv[1], sys.argv[2]
silent = js.connect(url)
silent.subscribe("handler.silent")  # takes requests, never answers them
silent.flush()
nc = js.connect(url)
closed = []

def on_alarm(signum, frame):
    nc.close()
    closed.append(nc.is_closed)

signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    if loop == "request":
        nc.request("handler.silent", b"", timeout=30)
    else:
        while True:
            nc.publish("handler.publish", b"x" * 100)
except js.ConnectionClosedError:
    print("the interrupted call: ConnectionClosedError")
print("close() in the handler returned:", closed)
for thread in threading.enumerate():
    if thread.name.startswith("jetstream_sync-2-"):
        thread.join(10)
        print("left running:", thread.name) if thread.is_alive() else None
silent.close()
"""


@pytest.mark.parametrize("loop", ["request", "publish"])
def test_close_from_a_signal_handler_that_interrupted_a_call(shared_server, loop):
    """close() in a signal handler returns; the interrupted call fails; every thread ends."""
    done = subprocess.run(
        [sys.executable, "-c", _CLOSE_IN_HANDLER, shared_server.url, loop],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "the interrupted call: ConnectionClosedError",
        "close() in the handler returned: [True]",
    ], done.stdout + done.stderr
