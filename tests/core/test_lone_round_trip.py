"""A lone caller's round trip in one C call (``ReadRole.round_trip``), against a real server.

A requester that can take the read role, and finds the writer idle, sends,
waits and reads its reply in one call of the protocol core; anything else
falls back to routing as before. These tests check that nothing is lost or
misrouted either way, that the deadline and a lost connection behave as on
the routed path, and that the path is taken (``role.round_trips``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync import Msg, NoRespondersError, _deadline, _protocol
from jetstream_sync._protocol import _py
from jetstream_sync._reply import PUBACK_FIELDS
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, stopped
from tests.fixtures.signals import interrupted_after

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def other(shared_server: Any) -> Iterator[js.Client]:
    """A second client on the shared server: responders and publishers live there."""
    with js.connect(shared_server.url) as client:
        yield client


def _echo(client: js.Client, subject: str) -> None:
    client.subscribe(subject, cb=lambda m: m.respond(m.data, headers=m.headers))
    client.flush()


def _round_trips(client: js.Client) -> int:
    return client._connection._reader.role.round_trips


def _record_statuses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The status of every round_trip call of the protocol core from now on, in order."""
    statuses: list[int] = []
    round_trip = _protocol.round_trip

    def recorded(*args: Any) -> Any:
        result = round_trip(*args)
        statuses.append(result[0])
        return result

    monkeypatch.setattr(_protocol, "round_trip", recorded)
    return statuses


def test_requests_interleaved_with_another_subscriptions_flood(nc, other):
    """2,000 lone requests while another subscription of the same client is flooded:
    every reply is the right one, every flood message arrives once and in order."""
    _echo(other, "lone.echo")
    got: list[int] = []
    nc.subscribe("lone.flood", cb=lambda m: got.append(int(m.data)))
    nc.flush()
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        n = 0
        while not stop.is_set():
            other.publish("lone.flood", b"%d" % n)
            n += 1
            if n % 64 == 0:
                other.flush(timeout=10)  # bursts of 64, paced by the server's PONG
        sent[0] = n

    before = _round_trips(nc)
    publisher = threading.Thread(target=flood, name="test-flood")
    publisher.start()
    try:
        for i in range(2000):
            payload = b"req-%d" % i
            assert nc.request("lone.echo", payload, timeout=10).data == payload
    finally:
        stop.set()
        publisher.join(10)
    other.flush()
    wait_for(lambda: len(got) == sent[0], timeout=30, message="flood messages were lost")
    assert got == list(range(sent[0]))
    assert sent[0] > 0
    assert _round_trips(nc) > before  # some replies still came alone


def test_a_reply_split_across_reads_is_read_whole(nc, other, monkeypatch):
    """A reply larger than one receive comes in parts: the first calls hand back a
    partial frame (kept in the buffer), the last one finds the reply complete."""
    _echo(other, "lone.big")
    payload = bytes(range(256)) * 3900  # ~1 MB: never in one receive of a 512 KiB buffer
    nc.request("lone.big", b"warm", timeout=10)
    statuses = _record_statuses(monkeypatch)
    assert nc.request("lone.big", payload, timeout=30).data == payload
    assert statuses[0] == _py.RT_OTHER and statuses[-1] == _py.RT_REPLY
    assert nc.request("lone.big", b"small again", timeout=10).data == b"small again"


def test_the_fast_path_is_taken_and_gives_what_routing_gives(nc, other, monkeypatch):
    """Replies read by the round trip equal those routed (subject, reply, data, headers,
    status, sid); the client's stats count both."""
    _echo(other, "lone.same")
    headers = {"K": ["a", "b"], "Other": "x"}
    nc.request("lone.same", b"warm", timeout=10)
    in_msgs = nc.stats.in_msgs
    before = _round_trips(nc)
    fast = [nc.request("lone.same", b"%d" % i, timeout=10, headers=headers) for i in range(50)]
    assert _round_trips(nc) - before > 25  # a quiet connection: most come alone
    assert nc.stats.in_msgs - in_msgs == 50
    # the writer has no room: the request goes the routed way
    monkeypatch.setattr(nc._connection._writer, "write_nowait", lambda frame: False)
    before = _round_trips(nc)
    routed = [nc.request("lone.same", b"%d" % i, timeout=10, headers=headers) for i in range(50)]
    assert _round_trips(nc) == before

    def fields(msg: js.Msg) -> tuple[Any, ...]:
        prefix = msg.subject.rpartition(".")[0]
        return (prefix, msg.reply, msg.data, dict(msg.headers.items()), msg.status, msg.sid)

    assert [fields(m) for m in fast] == [fields(m) for m in routed]
    assert fast[0].headers.get_all("K") == ["a", "b"]


def test_a_frame_queued_during_the_wait_goes_out_at_once(nc, other, monkeypatch):
    """While a lone request waits in C holding the read role, another thread's publish and
    flush are not held back until the reply: the writer sends them, and the flush's PONG is
    read and routed by the waiting requester.

    The wait's slice is made longer than the test, and the C calls' results
    recorded: the publish goes out while the requester is still in its first call.
    """
    monkeypatch.setattr(_deadline, "WAIT_SLICE", 60.0)
    _echo(other, "lone.warm")
    silent = other.subscribe("lone.silent")
    seen = other.subscribe("lone.meanwhile")
    other.flush()
    nc.request("lone.warm", b"", timeout=10)  # the inbox is subscribed: the writer is idle
    statuses = _record_statuses(monkeypatch)
    waiting: dict[str, Any] = {}

    def request() -> None:
        try:
            waiting["msg"] = nc.request("lone.silent", b"hold", timeout=30)
        except BaseException as exc:  # noqa: BLE001 - checked below
            waiting["error"] = exc

    thread = threading.Thread(target=request, name="test-requester")
    thread.start()
    held = silent.next_msg(timeout=10)  # the request is out; its caller waits
    role = nc._connection._reader.role
    wait_for(
        lambda: isinstance(role._holder, str),  # the holder is the request's token
        message="the request does not read for itself",
    )
    nc.publish("lone.meanwhile", b"now")
    assert seen.next_msg(timeout=10).data == b"now"
    assert statuses == []  # the requester is still in its first wait
    nc.flush(timeout=10)
    assert statuses[0] == _py.RT_OTHER  # the PONG, read and routed by the requester
    held.respond(b"done")
    thread.join(20)
    assert waiting.get("msg") is not None and waiting["msg"].data == b"done"


def test_the_deadline_holds_on_a_frozen_server(nats_server):
    """A lone request and a js.publish to a stopped server raise TimeoutError at the deadline."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="LONE", subjects=["lone.js.>"])
        ctx.publish("lone.js.a", b"1", timeout=5)
        _echo(nc, "lone.frozen")
        nc.request("lone.frozen", b"warm", timeout=5)
        with stopped(nats_server):
            for call in (
                lambda: nc.request("lone.frozen", b"x", timeout=0.6),
                lambda: ctx.publish("lone.js.b", b"2", timeout=0.6),
            ):
                start = time.monotonic()
                with pytest.raises(js.TimeoutError):
                    call()
                took = time.monotonic() - start
                assert 0.55 < took < 2.5, took
        assert ctx.publish("lone.js.c", b"3", timeout=10).seq >= 2


def test_a_server_killed_mid_request_fails_it_and_the_client_reconnects(tmp_path):
    """The lone requester waiting in C sees the connection drop: ConnectionLostError at
    once; the reader thread reconnects, and the next request reads its reply alone again."""
    server = NatsServer(directory=tmp_path / "nats-server").start()
    try:
        nc = js.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        responder = js.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        try:
            silent = responder.subscribe("lone.kill")
            responder.flush()
            outcome: dict[str, Any] = {}

            def request() -> None:
                start = time.monotonic()
                try:
                    nc.request("lone.kill", b"x", timeout=30)
                except BaseException as exc:  # noqa: BLE001 - checked below
                    outcome["error"] = exc
                outcome["took"] = time.monotonic() - start

            thread = threading.Thread(target=request, name="test-requester")
            thread.start()
            silent.next_msg(timeout=10)
            server.kill()
            thread.join(20)
            assert isinstance(outcome.get("error"), js.ConnectionLostError), outcome
            assert outcome["took"] < 10
            server.restart()
            wait_for(lambda: nc.is_connected and responder.is_connected, timeout=15)
            _echo(responder, "lone.back")
            before = _round_trips(nc)
            for _ in range(5):
                assert nc.request("lone.back", b"again", timeout=5).data == b"again"
            assert _round_trips(nc) > before
            assert nc.stats.reconnects == 1
        finally:
            nc.close()
            responder.close()
    finally:
        server.stop()


def test_js_publish_reads_its_pub_ack_in_the_round_trip(js, monkeypatch):
    """js.publish: the PubAcks read by the round trip equal the routed ones."""
    js.create_stream(name="LONEACK", subjects=["loneack.>"])
    client = js.client
    before = _round_trips(client)
    fast = [js.publish("loneack.x", b"%d" % i, msg_id=f"id-{i % 5}") for i in range(10)]
    assert _round_trips(client) > before
    assert [a.seq for a in fast] == [1, 2, 3, 4, 5] * 2
    assert [a.duplicate for a in fast] == [False] * 5 + [True] * 5
    # the writer has no room: the request goes the routed way
    monkeypatch.setattr(client._connection._writer, "write_nowait", lambda frame: False)
    routed = [js.publish("loneack.x", b"%d" % i, msg_id=f"id-{i % 5}") for i in range(5)]
    assert routed == fast[5:]
    assert routed[0].stream == "LONEACK" and routed[0].domain is None


def test_a_signal_during_the_wait_interrupts_the_caller_not_the_connection(nc, other):
    """A signal handler's exception (Ctrl-C) ends a lone request waiting in C; nothing
    was received, so the role is given back and the connection stays as it was."""
    silent = other.subscribe("lone.interrupted")
    _echo(other, "lone.after")
    nc.request("lone.after", b"warm", timeout=10)
    with interrupted_after(0.2) as interrupted, pytest.raises(interrupted):
        nc.request("lone.interrupted", b"x", timeout=20)
    assert silent.next_msg(timeout=5).data == b"x"
    before = _round_trips(nc)
    assert nc.request("lone.after", b"still", timeout=10).data == b"still"
    assert _round_trips(nc) == before + 1
    assert nc.stats.reconnects == 0 and nc.is_connected


def test_request_with_the_puback_decoder_gives_plain_fields_or_the_reply(js):
    """Client.request(decode=PUBACK_FIELDS): the fields of a plain PubAck read in the round
    trip; the reply Msg for an error; NoRespondersError where no stream listens; without
    a decoder, the Msg."""
    js.create_stream(name="LONERAW", subjects=["loneraw.>"])
    client = js.client
    client.request("loneraw.warm", b"", timeout=5)  # the inbox is subscribed
    got = client.request("loneraw.a", b"1", timeout=5, decode=PUBACK_FIELDS)
    assert isinstance(got, tuple)
    fields, body = got
    assert fields == ("LONERAW", 2, False, None)
    assert json.loads(body) == {"stream": "LONERAW", "seq": 2}
    plain = client.request("loneraw.a", b"2", timeout=5)
    assert isinstance(plain, Msg) and json.loads(plain.data)["seq"] == 3
    refused = client.request(
        "loneraw.a", b"3", timeout=5, headers={"Nats-Expected-Last-Sequence": "99"},
        decode=PUBACK_FIELDS,
    )  # fmt: skip
    assert isinstance(refused, Msg)
    assert json.loads(refused.data)["error"]["err_code"] == 10071
    with pytest.raises(NoRespondersError):
        client.request("lonenobody.a", b"", timeout=5, decode=PUBACK_FIELDS)
