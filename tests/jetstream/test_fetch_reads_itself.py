"""A fetch reads its own messages when nobody else reads the connection.

``Consumer.fetch`` waits on its own inbox subscription. When no other thread
reads the socket (nor waits for a reply), the fetching thread takes the read
role and reads and routes everything until its batch, or a status ending the
pull, is queued (``Subscription.read_pending``): no hand-off from the reader
thread. Never on the main thread, where a signal handler's exception could
cut a buffer's routing in half. These tests check that the path is taken
(``role.subscriber_reads``) off the main thread and not on it, that what it
routes for others arrives whole and in order, and that the deadline and a lost
connection behave as on the handed-off path, and a signal on the main thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

import jetstream_sync as jss
from jetstream_sync import AckPolicy
from jetstream_sync._dispatch import Filling
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, stopped
from tests.fixtures.signals import interrupted_after

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")


@pytest.fixture
def other(shared_server: Any) -> Iterator[jss.Client]:
    """A second client on the shared server: publishers and responders live there."""
    with jss.connect(shared_server.url) as client:
        yield client


def _reads(client: jss.Client) -> int:
    return client._connection._reader.role.subscriber_reads


def _fetch_reads(client: jss.Client) -> bool:
    return isinstance(client._connection._reader.role._holder, Filling)


def _a_fetch_reading_itself(
    nc: jss.Client, cons: Any, subject: str, timeout: float
) -> tuple[threading.Thread, dict[str, Any]]:
    """Start ``cons.fetch(1, timeout)`` on a thread until one takes the read role.

    A fetch takes the role only if it is free at that moment: the reader thread may be
    routing the PONGs of the inbox's subscription check just then, and the fetch then
    waits handed off. Such a fetch is ended with a message on ``subject`` and another is
    started. The outcome holds ``msgs`` (or ``error``) and ``took`` once it ends.
    """
    for _ in range(5):
        outcome: dict[str, Any] = {}

        def fetch(outcome: dict[str, Any] = outcome) -> None:
            start = time.monotonic()
            try:
                outcome["msgs"] = cons.fetch(1, timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - checked by the test
                outcome["error"] = exc
            outcome["took"] = time.monotonic() - start

        thread = threading.Thread(target=fetch, name="test-fetch")
        thread.start()
        try:
            wait_for(lambda: _fetch_reads(nc), timeout=2)
        except AssertionError:
            nc.jetstream().publish(subject, b"unblock", timeout=10)
            thread.join(20)
            continue
        return thread, outcome
    raise AssertionError("no fetch took the read role in 5 tries")


def _fill(js: jss.JetStreamContext, subject: str, n: int) -> None:
    for i in range(n):
        js.publish(subject, b"%d" % i)


def _on_a_thread(call: Callable[[], T]) -> T:
    """``call()`` on a thread of its own (not the main thread); its result, or its exception."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="test-fetching")
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the call did not return"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]  # type: ignore[no-any-return]


def _a_fetch_reads_itself(nc: jss.Client, cons: Any, subject: str) -> None:
    """Publish a message to ``subject`` and fetch it on a thread, until a fetch reads itself.

    A fetch takes the read role only if the role is free when the fetch comes to wait
    for its batch: on a loaded machine the reader thread may have woken for the batch
    first (or be routing the reply to the inbox's subscription check), and that batch
    comes handed off. Fails when none of 20 fetches reads the socket itself.
    """
    ctx = nc.jetstream()
    for i in range(20):
        before = _reads(nc)
        ctx.publish(subject, b"again %d" % i, timeout=10)
        assert len(_on_a_thread(lambda: cons.fetch(1, timeout=10))) == 1
        if _reads(nc) > before:
            return
    raise AssertionError("none of 20 fetches read the socket itself")


def _fetch_batches(cons: Any, batches: tuple[int, ...]) -> list[jss.Msg]:
    got = []
    for batch in batches:
        msgs = cons.fetch(batch, timeout=10)
        assert len(msgs) == batch
        got += msgs
    return got


def test_a_lone_fetch_reads_its_batch_itself(js, stream):
    """Batches of 1, 10, 100 and 189 come whole and in order, read by the fetching thread
    (when all four came handed off, a loaded machine's race: a later fetch reads itself)."""
    _fill(js, f"{stream.name}.a", 300)
    cons = stream.create_consumer(ack_policy=AckPolicy.NONE)
    before = _reads(js.client)
    got = _on_a_thread(lambda: _fetch_batches(cons, (1, 10, 100, 189)))
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 301))
    if _reads(js.client) == before:
        _a_fetch_reads_itself(js.client, cons, f"{stream.name}.a")
    assert _on_a_thread(lambda: cons.fetch(5, timeout=0.5)) == []  # the 408 ends the read


def test_a_fetch_on_the_main_thread_leaves_the_reading_to_the_reader_thread(js, stream):
    """On the main thread (where signal handlers run) the batches come handed off."""
    assert threading.current_thread() is threading.main_thread()
    _fill(js, f"{stream.name}.a", 111)
    cons = stream.create_consumer(ack_policy=AckPolicy.NONE)
    before = _reads(js.client)
    got = _fetch_batches(cons, (1, 10, 100))
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 112))
    assert _reads(js.client) == before


def test_what_a_fetch_reads_for_others_arrives_whole_and_in_order(js, stream, other):
    """While the fetch waits for a message that is not there yet, it routes another
    subscription's flood and other threads' requests; then its own message ends it."""
    nc = js.client
    flood = nc.subscribe("fetchreads.flood")
    other.subscribe("fetchreads.echo", cb=lambda m: m.respond(m.data))
    other.flush()
    cons = stream.create_consumer(ack_policy=AckPolicy.NONE)
    fetching, result = _a_fetch_reading_itself(nc, cons, f"{stream.name}.unblock", 30)
    for i in range(2000):
        other.publish("fetchreads.flood", b"%d" % i)
    replies = [nc.request("fetchreads.echo", b"r%d" % i, timeout=10).data for i in range(20)]
    assert replies == [b"r%d" % i for i in range(20)]
    other.flush()
    assert fetching.is_alive()
    other.jetstream().publish(f"{stream.name}.late", b"mine", timeout=10)
    fetching.join(20)
    assert [m.data for m in result["msgs"]] == [b"mine"]
    seen = []
    while len(seen) < 2000:
        seen += [m.data for m in flood.next_msgs(2000, timeout=10)]
    assert seen == [b"%d" % i for i in range(2000)]


def test_sixteen_threads_fetching_share_the_stream_exactly_once(js, stream):
    """16 threads fetch and ack from one consumer: every message once, whoever reads."""
    _fill(js, f"{stream.name}.a", 1600)
    cons = stream.create_consumer(durable_name="sixteen")
    seqs: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        while True:
            msgs = cons.fetch(7, timeout=1.5)
            if not msgs:
                return
            jss.ack_batch(msgs)
            with lock:
                seqs.extend(m.metadata.sequence.stream for m in msgs)

    threads = [threading.Thread(target=work, name=f"test-fetch-{i}") for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(seqs) == list(range(1, 1601))


def test_the_deadline_holds_on_a_frozen_server(nats_server):
    """A fetch reading for itself returns empty at its timeout when the server stops."""
    with jss.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="FROZENFETCH", subjects=["frozenfetch.>"])
        cons = stream.create_consumer(ack_policy=AckPolicy.NONE)
        ctx.publish("frozenfetch.a", b"1", timeout=5)
        assert len(cons.fetch(1, timeout=5)) == 1
        before = _reads(nc)
        with stopped(nats_server):
            start = time.monotonic()
            assert _on_a_thread(lambda: cons.fetch(1, timeout=1.0)) == []
            took = time.monotonic() - start
        assert 0.9 < took < 3.0, took
        assert _reads(nc) > before
        ctx.publish("frozenfetch.b", b"2", timeout=10)
        assert [m.data for m in _on_a_thread(lambda: cons.fetch(5, timeout=10))] == [b"2"]


def test_a_server_killed_mid_fetch_ends_it_and_the_client_reconnects(tmp_path):
    """The fetching thread reading the socket sees it drop and hands it to the reader
    thread, which reconnects; the fetch (its pull request gone with the connection) ends
    empty at its timeout, as a handed-off one does, and the next fetch reads itself again."""
    server = NatsServer(directory=tmp_path / "nats-server").start()
    try:
        nc = jss.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        try:
            ctx = nc.jetstream()
            stream = ctx.create_stream(name="KILLFETCH", subjects=["killfetch.>"])
            cons = stream.create_consumer(durable_name="k", ack_policy=AckPolicy.NONE)
            thread, outcome = _a_fetch_reading_itself(nc, cons, "killfetch.unblock", 4)
            server.kill()
            thread.join(20)
            assert outcome == {"msgs": [], "took": outcome["took"]}, outcome
            assert 3.5 < outcome["took"] < 8, outcome
            server.restart()
            wait_for(lambda: nc.is_connected, timeout=15)
            ctx.publish("killfetch.a", b"back", timeout=10)
            assert [m.data for m in _on_a_thread(lambda: cons.fetch(1, timeout=10))] == [b"back"]
            _a_fetch_reads_itself(nc, cons, "killfetch.a")
        finally:
            nc.close()
    finally:
        server.stop()


def test_a_signal_during_a_fetch_on_the_main_thread_interrupts_it_not_the_connection(js, stream):
    """A signal handler's exception (Ctrl-C) ends a fetch on the main thread; the
    connection stays up: the next fetch gets the message."""
    cons = stream.create_consumer(ack_policy=AckPolicy.NONE)
    with interrupted_after(0.2) as interrupted, pytest.raises(interrupted):
        cons.fetch(1, timeout=20)
    js.publish(f"{stream.name}.after", b"after", timeout=10)
    assert [m.data for m in cons.fetch(1, timeout=10)] == [b"after"]
    assert js.client.stats.reconnects == 0 and js.client.is_connected
