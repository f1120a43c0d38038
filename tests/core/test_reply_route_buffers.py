"""Reply routes with a whole-buffer handler: each reply once, through one handler or the other."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync import _protocol
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import TO_CLIENT


@pytest.fixture
def stream(shared_server: Any) -> Iterator[str]:
    """A fresh stream capturing ``<name>.>`` (its PubAcks are the replies), deleted after."""
    name = unique_stream_name("ROUTE")
    with js.connect(shared_server.url) as admin:
        admin.jetstream().create_stream(name=name, subjects=[f"{name}.>"])
        yield name
        admin.jetstream().delete_stream(name)


def _stored(shared_server: Any, stream: str) -> int:
    with js.connect(shared_server.url) as admin:
        return admin.jetstream().stream(stream).cached_info.state.messages


class Seen:
    """What each handler of a route got: tokens by handler, in arrival order."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[tuple[str, list[str]]] = queue.SimpleQueue()

    def tuples(self, replies: list[tuple[str, bytes, bytes | None]]) -> None:
        self.events.put(("tuples", [token for token, _, _ in replies]))

    def whole(self, buffer: memoryview, end: int, sid: int) -> None:
        ops, consumed, _ = _protocol.parse(buffer, 0, end)
        assert consumed == end
        tokens = []
        for i in range(0, len(ops), _protocol.OP_FIELDS):
            kind, so, sl, op_sid = ops[i : i + 4]
            assert kind in (_protocol.OP_MSG, _protocol.OP_HMSG) and op_sid == sid
            tokens.append(bytes(buffer[so : so + sl]).rsplit(b".", 1)[1].decode())
        self.events.put(("whole", tokens))

    def collect(self, count: int) -> dict[str, list[str]]:
        got: dict[str, list[str]] = {"tuples": [], "whole": []}
        while len(got["tuples"]) + len(got["whole"]) < count:
            kind, tokens = self.events.get(timeout=10)
            got[kind] += tokens
        return got


def test_a_buffer_of_only_route_replies_goes_to_the_buffer_handler(shared_server, stream):
    """With nothing else arriving, every reply comes through the whole-buffer handler.

    (The route's SUB goes between two PINGs: their PONGs are read before the replies.)"""
    seen = Seen()
    with js.connect(shared_server.url) as nc:
        prefix = nc.add_reply_route(seen.tuples, seen.whole)
        nc.flush(5.0)
        for token in range(200):
            nc.publish_routed(f"{stream}.a", b"x", prefix, token, 5.0)
        got = seen.collect(200)
    assert got["whole"] == [str(t) for t in range(200)]
    assert got["tuples"] == []


def test_replies_mixed_with_other_messages_come_as_tuples_each_once(
    shared_server, fault_proxy, stream
):
    """A read that also holds another subscription's messages goes to the tuple handler;
    every reply arrives exactly once, and the subscription gets its messages in order."""
    seen = Seen()
    with js.connect(fault_proxy.url) as nc:
        prefix = nc.add_reply_route(seen.tuples, seen.whole)
        sub = nc.subscribe(f"plain.{stream}")
        nc.flush()
        fault_proxy.stall(directions=(TO_CLIENT,))
        nc.publish(f"plain.{stream}", b"first")  # the proxy holds this read back alone
        fault_proxy.wait(lambda p: p.held > 0)
        for token in range(100):  # these wait in the socket: one read, all mixed
            nc.publish_routed(f"{stream}.a", b"x", prefix, token, 5.0)
            nc.publish(f"plain.{stream}", b"%d" % token)
        wait_for(lambda: _stored(shared_server, stream) == 100, timeout=10)
        fault_proxy.resume()
        got = seen.collect(100)
        expected = [b"first"] + [b"%d" % i for i in range(100)]
        assert [sub.next_msg(timeout=5).data for _ in range(101)] == expected
    assert sorted(got["tuples"] + got["whole"], key=int) == [str(t) for t in range(100)]
    assert got["tuples"]  # the held-back replies came mixed with the messages
