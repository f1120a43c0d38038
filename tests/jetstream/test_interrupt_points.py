"""Ctrl-C at every point of the calls a script makes on its main thread.

A signal handler's exception can land at any point where CPython runs a handler
(see ``jetstream_sync._signals``). Each test here raises it at the first point of
one call, then at the second, and so on until the call runs to its end, and after
each run checks that the client goes on: a flush completes (after a reconnect, when
the point gave the connection up) and another thread can still publish. A lock left
held, a role never given back or a flag left locked shows as a call that hangs or a
check that fails at a named point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync as js
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import interrupted_at

pytestmark = pytest.mark.timeout(180)


class Scene:
    """A client (reconnecting at once) with a stream, a durable consumer and a bucket."""

    def __init__(self, nc: js.Client, stream: str) -> None:
        self.nc = nc
        self.ctx = nc.jetstream()
        self.stream_name = stream
        self.stream = self.ctx.create_stream(name=stream, subjects=[f"{stream}.>"])
        # What an interrupted iterator took but never acked comes back soon.
        self.consumer = self.stream.create_consumer(durable_name="points", ack_wait=2)
        self.kv = self.ctx.create_key_value(bucket=f"{stream}_kv")
        self.kv.put("a", b"1")
        # What a call opened (an iterator, a consume, a watcher), stopped after it: stop()
        # is not the part interrupted. (Appending is no point: it returns when done.)
        self.opened: list[Any] = []
        self.sub = nc.subscribe(f"core.{stream}")
        nc.subscribe(f"echo.{stream}", cb=lambda m: m.respond(m.data))
        nc.flush()

    def stop_opened(self) -> None:
        """Stop what the last call opened."""
        while self.opened:
            self.opened.pop().stop()

    def flushes(self) -> bool:
        """Whether a flush completes (False: the connection was given up, a reconnect follows)."""
        try:
            self.nc.flush(timeout=10)
        except js.ConnectionLostError:
            return False
        return True

    def another_thread_publishes(self) -> bool:
        """Whether a publish from another thread is acknowledged within 15 s."""
        acked: list[object] = []
        thread = threading.Thread(
            target=lambda: acked.append(self.ctx.publish(f"{self.stream_name}.o", b"o", timeout=10))
        )
        thread.start()
        thread.join(15)
        return not thread.is_alive() and len(acked) == 1


def _publish_three(scene: Scene) -> None:
    for i in range(3):
        scene.ctx.publish(f"{scene.stream_name}.m", b"%d" % i, timeout=10)


def _fetch_and_ack(scene: Scene) -> None:
    _publish_three(scene)
    for msg in scene.consumer.fetch(3, timeout=10):
        msg.ack()


def _messages(scene: Scene) -> None:
    _publish_three(scene)
    scene.opened.append(scene.consumer.messages())
    for _ in range(3):
        next(scene.opened[-1]).ack()


def _consume_one(scene: Scene) -> None:
    got = threading.Event()
    scene.opened.append(scene.consumer.consume(lambda m: (m.ack(), got.set())))
    scene.ctx.publish(f"{scene.stream_name}.c", b"c", timeout=10)
    assert got.wait(10)


def _watch_initial(scene: Scene) -> None:
    scene.opened.append(scene.kv.watch("a"))
    assert [entry.key for entry in scene.opened[-1].initial()] == ["a"]


CALLS: dict[str, Callable[[Scene], Any]] = {
    "publish": lambda s: s.ctx.publish(f"{s.stream_name}.p", b"x", timeout=10),
    "request": lambda s: s.nc.request(f"echo.{s.stream_name}", b"x", timeout=10),
    "stream-info": lambda s: s.stream.info(),
    "fetch-and-ack": _fetch_and_ack,
    "messages": _messages,
    "consume": _consume_one,
    "kv-get": lambda s: s.kv.get("a"),
    "kv-put": lambda s: s.kv.put("a", b"2"),
    "kv-watch": _watch_initial,
    "next-msg": lambda s: (s.nc.publish(f"core.{s.stream_name}", b"1"), s.sub.next_msg(timeout=5)),
    "purge-subject": lambda s: s.stream.purge(subject=f"{s.stream_name}.p"),
}


@pytest.fixture
def scene(shared_server: Any) -> Iterator[Scene]:
    """The scene on the shared server; its stream and bucket are deleted afterwards."""
    with js.connect(shared_server.url, reconnect_time_wait=0.01) as nc:
        name = unique_stream_name("POINTS")
        built = Scene(nc, name)
        try:
            yield built
        finally:
            built.ctx.delete_key_value(f"{name}_kv")
            built.ctx.delete_stream(name)


def _call_threads() -> list[str]:
    """The consume and watch threads still running (a call must not leave one behind).

    A thread ``Thread.start`` was interrupted in before it began stays listed but never
    runs: ``is_alive()`` leaves it out.
    """
    running = (thread.name for thread in threading.enumerate() if thread.is_alive())
    return [n for n in running if n.startswith(("jetstream_sync-consume", "jetstream_sync-watch"))]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_interrupted_at_every_point_leaves_the_client_working(scene, name):
    """Interrupted at each of its points in turn, on the main thread: afterwards a flush
    completes, no consume or watch thread is left running, and another thread's publish
    is acknowledged."""
    call = CALLS[name]
    point = 0
    while True:
        point += 1
        try:
            done = not interrupted_at(point, lambda: call(scene))
        except js.ConnectionLostError:
            done = False  # interrupted with bytes not parsed: the connection was given up
        scene.stop_opened()
        wait_for(scene.flushes, timeout=30, message=f"a flush after point {point}")
        wait_for(lambda: not _call_threads(), timeout=30, message=f"threads end after {point}")
        assert scene.another_thread_publishes(), f"another thread's publish after point {point}"
        if done:
            break
    assert point > 10
