"""publish_async_completed() and publish_async_pending() count a future until it is done.

A future whose ack was read is handed to another thread to be settled (the ack
thread for errors and futures someone listens to; the events thread for a lost
link's): until that thread has settled it, it is still pending. A done-callback
that blocks holds that thread, so the futures after it stay not done meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST
from tests.fixtures.proxy import TO_CLIENT, FaultProxy
from tests.fixtures.server import NatsServer


class HeldCallback:
    """A done-callback that holds the thread running it until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, _future: object) -> None:
        self.entered.set()
        self.release.wait(15)


@pytest.fixture
def proxied(fault_proxy: FaultProxy, stream_name: str) -> Iterator[tuple[js.JetStreamContext, str]]:
    """A context connected through ``fault_proxy`` and a fresh stream on ``<name>.>``."""
    with js.connect(fault_proxy.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
        yield ctx, stream_name


def held_ack_thread(
    fault_proxy: FaultProxy, ctx: js.JetStreamContext, subject: str
) -> HeldCallback:
    """Publish once with a :class:`HeldCallback`, attached before the ack can come (the
    proxy holds the replies meanwhile): the ack thread runs it and stays held."""
    held = HeldCallback()
    fault_proxy.stall(directions=(TO_CLIENT,))
    ctx.publish_async(subject, b"first").add_done_callback(held)
    fault_proxy.resume()
    assert held.entered.wait(10)
    return held


def test_completed_waits_for_the_futures_the_ack_thread_has_not_settled(fault_proxy, proxied):
    """Acks read but not yet settled (the ack thread is held by a callback): completed
    raises TimeoutError and pending counts them; once released, every future is done."""
    ctx, name = proxied
    held = held_ack_thread(fault_proxy, ctx, f"{name}.a")
    try:
        fault_proxy.stall(directions=(TO_CLIENT,))
        futures = [ctx.publish_async(f"{name}.a", b"%d" % i) for i in range(20)]
        for future in futures:
            future.add_done_callback(lambda _f: None)  # settled by the ack thread
        fault_proxy.resume()
        ctx.client.flush(timeout=5)  # every ack has been read (they come before the PONG)
        assert not any(future.done() for future in futures)
        assert ctx.publish_async_pending() == 21  # and the first, until its callback returns
        with pytest.raises(TimeoutError):
            ctx.publish_async_completed(timeout=0.2)
        held.release.set()
        ctx.publish_async_completed(timeout=10)
        assert all(future.result(0).stream == name for future in futures)
        assert ctx.publish_async_pending() == 0
    finally:
        held.release.set()


def test_completed_waits_for_the_futures_a_lost_link_has_not_failed_yet(tmp_path: Path):
    """The link goes stale: its futures fail one by one on the events thread, whose first
    callback blocks; completed does not return before every one of them is done."""
    server = NatsServer(directory=tmp_path).start()
    try:
        with js.connect(server.url, **FAST) as nc:
            ctx = nc.jetstream(ack_timeout=30)
            ctx.create_stream(name="LOST", subjects=["lost.>"])
            with server.freeze():  # no ack comes; the PINGs go unanswered: the link is lost
                held = HeldCallback()
                futures = [ctx.publish_async("lost.a", b"%d" % i) for i in range(20)]
                futures[0].add_done_callback(held)
                assert held.entered.wait(10)  # the events thread is failing them
                assert not futures[-1].done()
                assert ctx.publish_async_pending() > 0
                with pytest.raises(TimeoutError):
                    ctx.publish_async_completed(timeout=0.2)
                held.release.set()
                ctx.publish_async_completed(timeout=10)
            assert all(isinstance(f.exception(0), js.ConnectionLostError) for f in futures)
    finally:
        held.release.set()
        server.stop()


def test_completed_from_a_done_callback_raises_inline_callback_error(fault_proxy, proxied):
    """A done-callback runs on the thread that settles the futures: publish_async_completed
    there would wait for itself, so it raises InlineCallbackError at once."""
    ctx, name = proxied
    raised: list[BaseException] = []

    def wait_all(_future: object) -> None:
        try:
            ctx.publish_async_completed(timeout=5)
        except BaseException as exc:
            raised.append(exc)

    fault_proxy.stall(directions=(TO_CLIENT,))
    ctx.publish_async(f"{name}.a", b"x").add_done_callback(wait_all)
    fault_proxy.resume()
    ctx.publish_async_completed(timeout=10)
    assert len(raised) == 1
    assert isinstance(raised[0], js.InlineCallbackError)
