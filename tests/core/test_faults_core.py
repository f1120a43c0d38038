"""Core NATS through a fault proxy: cuts, stalls, refusals and a byte-at-a-time link.

Each test ends in the right result or a typed error within its timeout, and
the client works afterwards. The publishing side that must not be disturbed
talks to the server directly; the client under test goes through the proxy.
"""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST, assert_works
from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import TO_CLIENT, TO_SERVER, FaultProxy
from tests.fixtures.server import NatsServer


@pytest.fixture
def direct(shared_server):
    """A client of the same server that bypasses the proxy."""
    with js.connect(shared_server.url) as nc:
        yield nc


def test_cut_reconnects_and_messages_after_it_arrive(fault_proxy, fault_client, events, direct):
    """After a cut the subscriptions are restored: what is published afterwards arrives."""
    sub = fault_client.subscribe("faults.core.cut")
    fault_client.flush()
    direct.publish("faults.core.cut", b"before")
    assert sub.next_msg(timeout=5).data == b"before"
    assert fault_proxy.cut() == 1
    events.wait(lambda e: e.reconnects == 1)
    fault_client.flush(timeout=5)  # the SUB sent on the new link reached the server
    for i in range(10):
        direct.publish("faults.core.cut", b"after %d" % i)
    assert [sub.next_msg(timeout=5).data for _ in range(10)] == [b"after %d" % i for i in range(10)]
    assert fault_proxy.accepted == 2 and fault_client.stats.reconnects == 1
    assert not events.errors
    assert_works(fault_client)


@pytest.mark.parametrize("nbytes", [1, 13, 100])
@pytest.mark.parametrize("direction", [TO_CLIENT, TO_SERVER])
def test_cut_in_the_middle_of_a_frame(fault_proxy, fault_client, events, direct, direction, nbytes):
    """A link cut a few bytes into a frame is a plain disconnect, never a protocol error."""
    sub = fault_client.subscribe("faults.core.mid")
    fault_client.flush()
    fault_proxy.cut_after(nbytes, direction)
    payload = b"x" * 1000
    if direction == TO_CLIENT:
        direct.publish("faults.core.mid", payload)
    else:
        fault_client.publish("faults.core.mid", payload)
    events.wait(lambda e: e.reconnects == 1)
    fault_client.flush(timeout=5)
    direct.publish("faults.core.mid", b"after")
    data = [sub.next_msg(timeout=5).data]
    while data[-1] != b"after":
        data.append(sub.next_msg(timeout=5).data)
    assert data in ([b"after"], [payload, b"after"])  # at most once: core NATS
    assert not events.errors_of(js.ProtocolError), events.errors
    assert_works(fault_client)


def test_stall_is_detected_as_stale_and_the_client_reconnects_after_it(
    fault_proxy, fault_client, events
):
    """An open-ended stall is declared stale within the PING budget; reconnects wait it out."""
    sub = fault_client.subscribe("faults.core.stall")
    fault_client.flush()
    fault_proxy.stall()
    events.wait(lambda e: e.disconnects == 1, timeout=5)
    assert any("stale" in str(e) for e in events.errors)
    assert fault_client.is_reconnecting
    with pytest.raises(js.TimeoutError):  # waits for the new link, which is stalled too
        fault_client.flush(timeout=0.3)
    fault_proxy.resume()
    events.wait(lambda e: e.reconnects == 1)
    fault_client.publish("faults.core.stall", b"after")
    assert sub.next_msg(timeout=5).data == b"after"
    assert_works(fault_client)


def test_request_at_a_cut_fails_at_once_and_works_after(fault_proxy, fault_client, events, direct):
    """A request in flight at a cut raises ConnectionLostError at once; the next one works."""
    held = threading.Event()
    release = threading.Event()

    def slow(msg):
        held.set()
        release.wait(10)
        msg.respond(b"late")

    direct.subscribe("faults.core.req", cb=slow)
    direct.flush()
    outcome: list[object] = []

    def ask():
        started = time.monotonic()
        try:
            outcome.append(fault_client.request("faults.core.req", b"q", timeout=5))
        except js.NatsError as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        assert held.wait(5)
        fault_proxy.cut()
        asker.join(5)
    finally:
        release.set()
        asker.join()
    error, elapsed = outcome
    assert isinstance(error, js.ConnectionLostError), error
    assert elapsed < 5
    events.wait(lambda e: e.reconnects == 1)
    direct.subscribe("faults.core.echo", cb=lambda m: m.respond(m.data))
    direct.flush()
    assert fault_client.request("faults.core.echo", b"again", timeout=5).data == b"again"


def test_requests_through_repeated_cuts_succeed_or_fail_typed(fault_proxy, fault_client, direct):
    """Requests while the link is cut again and again: each one is answered right or fails typed."""
    direct.subscribe("faults.core.many", cb=lambda m: m.respond(b"re:" + m.data))
    direct.flush()
    stop = threading.Event()
    results: dict[str, int] = {"ok": 0, "lost": 0, "timeout": 0}

    def ask_forever():
        i = 0
        while not stop.is_set():
            i += 1
            body = b"%d" % i
            try:
                reply = fault_client.request("faults.core.many", body, timeout=1)
            except js.ConnectionLostError:
                results["lost"] += 1
            except js.TimeoutError:
                results["timeout"] += 1
            else:
                assert reply.data == b"re:" + body
                results["ok"] += 1

    asker = threading.Thread(target=ask_forever)
    asker.start()
    try:
        for cuts in range(1, 6):
            fault_proxy.wait(lambda p, n=cuts: p.accepted == n and p.to_client > 0)
            ok = results["ok"]
            fault_proxy.wait(lambda p, ok=ok: results["ok"] > ok + 20)
            fault_proxy.cut()
        fault_proxy.wait(lambda p: p.accepted == 6)
    finally:
        stop.set()
        asker.join()
    assert results["ok"] > 100
    assert fault_client.request("faults.core.many", b"end", timeout=5).data == b"re:end"


def test_refused_reconnects_are_retried_and_buffered_publishes_arrive(
    fault_proxy, fault_client, events, direct
):
    """While the proxy refuses (then stops listening) the client keeps trying; nothing
    published meanwhile is lost once it gets through."""
    sub = direct.subscribe("faults.core.buffered")
    direct.flush()
    fault_proxy.refuse()
    fault_proxy.cut()
    events.wait(lambda e: e.disconnects == 1)
    for i in range(100):
        fault_client.publish("faults.core.buffered", b"%d" % i)
    fault_proxy.wait(lambda p: p.refused >= 3)
    fault_proxy.refuse(unlisten=True)
    assert fault_client.is_reconnecting
    fault_proxy.accept()
    events.wait(lambda e: e.reconnects == 1)
    fault_client.flush(timeout=5)
    assert [sub.next_msg(timeout=5).data for _ in range(100)] == [b"%d" % i for i in range(100)]
    assert_works(fault_client)


def test_a_whole_session_one_byte_at_a_time(fault_proxy, shared_server, stream_name):
    """Every byte the server sends arrives on its own: connect, sub, pub, request and a
    JetStream publish with its ack all work."""
    fault_proxy.trickle()
    with js.connect(fault_proxy.url, **FAST) as nc:
        sub = nc.subscribe("faults.trickle.>")
        responder = nc.subscribe("faults.trickle.svc", cb=lambda m: m.respond(m.data.upper()))
        nc.publish("faults.trickle.a", b"hello\r\nworld")
        nc.publish("faults.trickle.b", b"h", headers={"K": "v"})
        first, second = sub.next_msg(timeout=10), sub.next_msg(timeout=10)
        assert first.data == b"hello\r\nworld"
        assert second.headers["K"] == "v"
        assert nc.request("faults.trickle.svc", b"abc", timeout=10).data == b"ABC"
        responder.unsubscribe()
        ctx = nc.jetstream(timeout=10)
        ctx.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
        try:
            ack = ctx.publish(f"{stream_name}.x", b"stored", msg_id="one")
            assert (ack.stream, ack.seq, ack.duplicate) == (stream_name, 1, False)
            assert ctx.publish(f"{stream_name}.x", b"stored", msg_id="one").duplicate
        finally:
            ctx.delete_stream(stream_name)
        assert nc.stats.reconnects == 0
    assert fault_proxy.sends_to_client == fault_proxy.to_client > 1000


@pytest.mark.parametrize("nbytes", [10, 200])
def test_a_reconnect_cut_in_the_middle_of_its_handshake_is_retried(
    fault_proxy, fault_client, events, nbytes
):
    """The next link is cut while its INFO is half delivered; the attempt after it works."""
    fault_proxy.refuse(unlisten=True)  # no new link until the trap is set
    fault_proxy.cut()
    events.wait(lambda e: e.disconnects == 1)
    fault_proxy.cut_after(nbytes, TO_CLIENT)  # the next link, before the PONG of its handshake
    fault_proxy.accept()
    events.wait(lambda e: e.reconnects == 1)
    fault_proxy.wait(lambda p: p.accepted == 3 and p.cuts == 2)
    assert not events.errors_of(js.ProtocolError)
    assert_works(fault_client)


@pytest.mark.parametrize("fault", ["refuse", "unlisten", "stall"])
def test_connect_through_a_dead_link_fails_within_connect_timeout(fault_proxy, fault):
    """connect() to a server that refuses, is not listening or never answers raises
    NoServersError within its connect_timeout; once the link is back it connects."""
    if fault == "stall":
        fault_proxy.stall()
    else:
        fault_proxy.refuse(unlisten=fault == "unlisten")
    started = time.monotonic()
    with pytest.raises(js.NoServersError):
        js.connect(fault_proxy.url, connect_timeout=0.5)
    assert time.monotonic() - started < 3
    fault_proxy.pass_through()
    fault_proxy.accept()
    with js.connect(fault_proxy.url, connect_timeout=5) as nc:
        assert_works(nc)


def test_buffered_publishes_too_big_for_the_new_server_are_dropped_and_reported(
    shared_server, tmp_path, events
):
    """Reattaching to a server with a smaller max_payload: the buffered frames too big for it
    go to error_cb as MaxPayloadError (a request waiting for a reply to one raises it);
    every other buffered publish arrives."""
    small = NatsServer(jetstream=False, max_payload=1024, directory=tmp_path).start()
    try:
        with (
            FaultProxy(shared_server.port) as big_link,
            FaultProxy(small.port) as small_link,
            js.connect(small.url) as reader,
        ):
            small_link.refuse()
            sub = reader.subscribe("faults.core.payload")
            reader.flush()
            options = {**FAST, **events.callbacks()}
            with js.connect([big_link.url, small_link.url], no_randomize=True, **options) as nc:
                big_link.refuse()
                big_link.cut()
                events.wait(lambda e: e.disconnects == 1)
                for i in range(10):
                    nc.publish("faults.core.payload", b"%d" % i)
                nc.publish("faults.core.payload", b"x" * 4000)  # the big server took it
                for i in range(10, 20):
                    nc.publish("faults.core.payload", b"%d" % i, headers={"N": str(i)})
                nc.publish("faults.core.payload", b"y" * 4000, headers={"Big": "yes"})
                for i in range(20, 30):
                    nc.publish("faults.core.payload", b"%d" % i)
                outcome: list[BaseException] = []

                def big_request() -> None:
                    try:
                        nc.request("faults.core.service", b"z" * 4000, timeout=60)
                    except BaseException as exc:
                        outcome.append(exc)

                requester = threading.Thread(target=big_request)
                requester.start()
                wait_for(lambda: nc.stats.out_msgs == 33)  # the request is buffered
                small_link.accept()
                events.wait(lambda e: e.reconnects == 1)
                requester.join()
                assert len(outcome) == 1 and isinstance(outcome[0], js.MaxPayloadError)
                nc.flush(timeout=5)
                got = [sub.next_msg(timeout=5).data for _ in range(30)]
                assert got == [b"%d" % i for i in range(30)]
                events.wait(lambda e: len(e.errors) == 3)
                assert all(isinstance(x, js.MaxPayloadError) for x in events.errors)
                assert events.disconnects == 1  # the small server kept the connection
                assert_works(nc)
    finally:
        small.stop()
