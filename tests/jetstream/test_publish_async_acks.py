"""Async-publish acks settled a read at a time: every kind of reply, many threads, one client."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

import jetstream_sync as js
from jetstream_sync.jetstream import _ack_mux
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import TO_CLIENT


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many acks each whole-buffer decode of the ack mux read, call by call."""
    calls: list[int] = []
    real = _ack_mux._puback_batch

    def counting(*args: object) -> object:
        batch = real(*args)  # type: ignore[arg-type]
        calls.append(len(batch.tokens))
        return batch

    monkeypatch.setattr(_ack_mux, "_puback_batch", counting)
    return calls


@pytest.fixture
def stream(shared_server) -> Iterator[str]:
    """A fresh stream capturing ``<name>.>`` with direct gets, deleted afterwards."""
    name = unique_stream_name("ACKS")
    with js.connect(shared_server.url) as admin:
        ctx = admin.jetstream()
        ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
        yield name
        ctx.delete_stream(name)


def _stored(shared_server, stream: str) -> int:
    with js.connect(shared_server.url) as admin:
        return admin.jetstream().stream(stream).cached_info.state.messages


def test_acks_of_one_read_resolve_every_kind_of_reply(shared_server, fault_proxy, stream, decoded):
    """Acks held back and delivered together: plain, duplicate, error and status replies
    mixed in one read each settle their own future, in publish order."""
    with js.connect(fault_proxy.url) as nc:
        ctx = nc.jetstream()
        ctx.publish_async(f"{stream}.warm", b"w").result(timeout=10)  # subscribes the ack inbox
        decoded.clear()
        fault_proxy.stall(directions=(TO_CLIENT,))
        plain = [ctx.publish_async(f"{stream}.a", b"%d" % i) for i in range(100)]
        first = ctx.publish_async(f"{stream}.d", b"d", msg_id="dup-1")
        duplicate = ctx.publish_async(f"{stream}.d", b"d", msg_id="dup-1")
        wrong_last = ctx.publish_async(f"{stream}.e", b"e", expected_last_seq=1)
        no_stream = ctx.publish_async(f"NOSTREAM{stream}.x", b"x")  # a 503 status (HMSG)
        later = [ctx.publish_async(f"{stream}.b", b"%d" % i) for i in range(100)]
        wait_for(lambda: _stored(shared_server, stream) == 202, timeout=10)
        assert not any(f.done() for f in plain + later)  # nothing came back yet
        fault_proxy.resume()
        ctx.publish_async_completed(timeout=10)

    assert [f.result().seq for f in plain] == list(range(2, 102))
    assert first.result().seq == duplicate.result().seq == 102
    assert not first.result().duplicate and duplicate.result().duplicate
    with pytest.raises(js.WrongLastSequenceError):
        wrong_last.result()
    with pytest.raises(js.NoRespondersError):
        no_stream.result()
    assert [f.result().seq for f in later] == list(range(103, 203))
    assert {f.result().stream for f in plain + later} == {stream}
    assert sum(decoded) == 204 and max(decoded) > 1  # read whole, many acks per call


def test_acks_read_together_with_other_messages_resolve_in_order(
    shared_server, fault_proxy, stream, monkeypatch
):
    """Acks that share a read with a subscription's messages come as tuples, op by op:
    their futures resolve the same way (a plain ack, a duplicate, an error)."""
    tuples: list[int] = []
    deliver = _ack_mux.AsyncPublisher.deliver

    def counting(self: _ack_mux.AsyncPublisher, replies: list) -> None:
        tuples.append(len(replies))
        deliver(self, replies)

    monkeypatch.setattr(_ack_mux.AsyncPublisher, "deliver", counting)
    with js.connect(fault_proxy.url) as nc:
        ctx = nc.jetstream()
        sub = nc.subscribe(f"other.{stream}")
        ctx.publish_async(f"{stream}.warm", b"w").result(timeout=10)
        fault_proxy.stall(directions=(TO_CLIENT,))
        nc.publish(f"other.{stream}", b"first")  # the proxy holds this read back alone
        fault_proxy.wait(lambda p: p.held > 0)
        futures = []  # the rest waits in the socket: one read, acks and messages mixed
        for i in range(100):
            futures.append(ctx.publish_async(f"{stream}.a", b"%d" % i))
            nc.publish(f"other.{stream}", b"%d" % i)
        duplicate = ctx.publish_async(f"{stream}.a", b"d", msg_id="d", expected_stream=stream)
        again = ctx.publish_async(f"{stream}.a", b"d", msg_id="d")
        wrong = ctx.publish_async(f"{stream}.a", b"e", expected_stream="NOT" + stream)
        nc.publish(f"other.{stream}", b"last")
        wait_for(lambda: _stored(shared_server, stream) == 102, timeout=10)
        fault_proxy.resume()
        ctx.publish_async_completed(timeout=10)
        got = [sub.next_msg(timeout=5).data for _ in range(102)]
    assert got == [b"first"] + [b"%d" % i for i in range(100)] + [b"last"]
    assert [f.result().seq for f in futures] == list(range(2, 102))
    assert duplicate.result().seq == again.result().seq == 102 and again.result().duplicate
    with pytest.raises(js.APIError):
        wrong.result()
    assert sum(tuples) > 0  # some acks shared a read with the other messages


def test_a_future_waited_on_or_listened_to_gets_its_ack(shared_server, stream, decoded):
    """Futures with a waiter or a done-callback are settled on the ack thread, once each."""
    calls: Counter[int] = Counter()
    lock = threading.Lock()

    def count(future: js.PubAckFuture) -> None:
        with lock:
            calls[future.result().seq] += 1

    with js.connect(shared_server.url) as nc:
        ctx = nc.jetstream()
        # Subscribes the ack inbox; the flush reads every PONG owed so far, so the reads
        # below hold acks only (a PONG read with them sends all of them the tuple way).
        ctx.publish_async(f"{stream}.warm", b"w").result(timeout=10)
        nc.flush()
        decoded.clear()
        futures = []
        for i in range(300):
            future = ctx.publish_async(f"{stream}.c", b"%d" % i)
            if i % 3 == 0:
                future.add_done_callback(count)
            futures.append(future)
        ctx.publish_async_completed(timeout=10)
        wait_for(lambda: sum(calls.values()) == 100, message=lambda: f"{calls}")
    assert [f.result().seq for f in futures] == list(range(2, 302))
    assert calls == Counter(range(2, 302, 3))
    assert sum(decoded) >= 1


def test_sixteen_threads_publish_async_on_one_client(shared_server, stream):
    """16 threads x 250 async publishes: every future resolves once, to the seq of its message."""
    threads_n, per_thread = 16, 250
    results: dict[bytes, js.PubAckFuture] = {}
    lock = threading.Lock()
    done_calls: Counter[bytes] = Counter()
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    with js.connect(shared_server.url) as nc:
        ctx = nc.jetstream(max_ack_inflight=1000)

        def publisher(t: int) -> None:
            try:
                start.wait(timeout=10)
                for i in range(per_thread):
                    data = b"%d-%d" % (t, i)
                    future = ctx.publish_async(f"{stream}.t{t}", data)
                    if i % 10 == 0:
                        future.add_done_callback(lambda f, d=data: _count(done_calls, lock, d))
                    with lock:
                        results[data] = future
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        threads = [threading.Thread(target=publisher, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        ctx.publish_async_completed(timeout=30)
        stored = nc.jetstream().stream(stream).get_msgs(start_seq=1, batch=threads_n * per_thread)
        wait_for(lambda: sum(done_calls.values()) == threads_n * per_thread // 10)

    by_seq = {m.seq: m.data for m in stored}
    assert len(by_seq) == threads_n * per_thread
    assert {by_seq[f.result().seq]: f for f in results.values()} == results
    assert set(done_calls.values()) == {1}
    for t in range(threads_n):  # one thread's messages are stored in the order it sent them
        seqs = [results[b"%d-%d" % (t, i)].result().seq for i in range(per_thread)]
        assert seqs == sorted(seqs)


def _count(counter: Counter[bytes], lock: threading.Lock, data: bytes) -> None:
    with lock:
        counter[data] += 1


def test_a_foreign_reply_to_the_ack_inbox_is_ignored(shared_server, fault_proxy, stream):
    """A message another client sends to the ack inbox (a token of 3,000 digits, text),
    alone in a read or mixed with others, is dropped: the connection stays up."""
    drops: list[str] = []
    with (
        js.connect(fault_proxy.url, disconnected_cb=lambda: drops.append("x")) as nc,
        js.connect(shared_server.url) as foreign,
    ):
        ctx = nc.jetstream()
        ctx.publish_async(f"{stream}.warm", b"w").result(timeout=10)
        prefix = ctx._async._prefix  # the ack inbox, as a snooping client could learn it
        sub = nc.subscribe(f"other.{stream}")
        nc.flush()
        fault_proxy.stall(directions=(TO_CLIENT,))
        nc.publish(f"other.{stream}", b"first")  # held back alone: the rest reads mixed
        fault_proxy.wait(lambda p: p.held > 0)
        foreign.publish(prefix + "9" * 3000, b'{"stream":"X","seq":1}')
        foreign.publish(prefix + "not-a-token", b"{}")
        nc.publish(f"other.{stream}", b"second")
        foreign.flush()
        fault_proxy.resume()
        assert [sub.next_msg(timeout=5).data for _ in range(2)] == [b"first", b"second"]
        foreign.publish(prefix + "8" * 3000, b"alone")  # a read of its own: decoded in C
        foreign.flush()
        assert ctx.publish_async(f"{stream}.after", b"a").result(timeout=10).seq == 2
    assert drops == []
