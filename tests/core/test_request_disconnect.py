"""Requests, JetStream publishes and API calls in flight fail at once when the connection drops."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, all_threads_stopped

# Each call waits up to this long for its reply; failing "at once" means well before it.
CALL_TIMEOUT = 30.0


class Outcome:
    """What a call made on another thread raised, and how long it took."""

    def __init__(self, call: Callable[[], object]) -> None:
        """Run ``call`` on a new thread at once."""
        self.error: BaseException | None = None
        self.elapsed: float | None = None
        self._call = call
        self._thread = threading.Thread(target=self._run, name="test-caller")
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        try:
            self._call()
        except BaseException as exc:  # inspected by the test
            self.error = exc
        self.elapsed = time.monotonic() - start

    def join(self) -> BaseException | None:
        """Wait for the call to end (it must, well before its timeout); return its error."""
        self._thread.join(CALL_TIMEOUT + 10)
        assert not self._thread.is_alive(), "the call is still blocked"
        return self.error


@pytest.fixture
def server(tmp_path) -> Iterator[NatsServer]:
    """A JetStream server this module kills and restarts."""
    server = NatsServer(directory=tmp_path / "nats-server").start()
    yield server
    server.stop()


@pytest.fixture
def core_server(tmp_path) -> Iterator[NatsServer]:
    """A server without JetStream: a plain subscriber can stand in for the JetStream API."""
    server = NatsServer(jetstream=False, directory=tmp_path / "core-server").start()
    yield server
    server.stop()


def _connect(server: NatsServer) -> js.Client:
    return js.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)


def _silent_subscriber(client: js.Client, subject: str) -> threading.Event:
    """Subscribe ``client`` to ``subject`` and never answer; the event is set when a message
    arrives."""
    received = threading.Event()
    client.subscribe(subject, cb=lambda m: received.set())
    client.flush()
    return received


def _assert_lost(outcome: Outcome) -> None:
    error = outcome.join()
    assert isinstance(error, js.ConnectionLostError), repr(error)
    assert isinstance(error, js.NatsError)
    assert "may or may not have been processed" in str(error)
    assert outcome.elapsed < CALL_TIMEOUT / 3


def test_request_to_a_silent_responder_fails_when_the_server_dies(server):
    """A request whose responder never answers raises ConnectionLostError when the server dies."""
    nc = _connect(server)
    responder = _connect(server)
    try:
        received = _silent_subscriber(responder, "svc.silent")
        outcome = Outcome(lambda: nc.request("svc.silent", b"x", timeout=CALL_TIMEOUT))
        assert received.wait(10), "the request never reached the responder"
        server.kill()
        _assert_lost(outcome)
        server.restart()
        wait_for(lambda: nc.is_connected and responder.is_connected, timeout=15)
        responder.subscribe("svc.echo", cb=lambda m: m.respond(m.data))
        responder.flush()
        assert nc.request("svc.echo", b"back", timeout=5).data == b"back"
    finally:
        nc.close()
        responder.close()


def test_js_publish_fails_when_the_server_dies_mid_flight(server):
    """js.publish sent to a stalled server raises ConnectionLostError once the server is killed."""
    nc = _connect(server)
    try:
        ctx = nc.jetstream()
        ctx.create_stream(name="LOST", subjects=["lost.>"])
        ctx.publish("lost.before", b"1", timeout=5)
        sent = nc.stats.out_msgs
        os.kill(server.pid, signal.SIGSTOP)  # the publish goes out but is never answered
        wait_for(lambda: all_threads_stopped(server.pid), message="the server did not stop")
        outcome = Outcome(lambda: ctx.publish("lost.x", b"2", msg_id="m-2", timeout=CALL_TIMEOUT))
        wait_for(lambda: nc.stats.out_msgs > sent, message="the publish was never written")
        server.kill()
        _assert_lost(outcome)
        server.restart()
        wait_for(lambda: nc.is_connected, timeout=15)
        ack = ctx.publish("lost.x", b"2", msg_id="m-2", timeout=10)  # the advised retry
        assert ack.stream == "LOST" and ack.seq == 2
    finally:
        nc.close()


def test_get_msgs_fails_when_the_server_dies_mid_call(restartable_server):
    """A batched direct get (stream.get_msgs) sent to a stalled server raises
    ConnectionLostError once the server is killed, not at its timeout."""
    server = restartable_server
    nc = _connect(server)
    try:
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="GETMSGS", subjects=["gm.>"], allow_direct=True)
        ctx.publish("gm.a", b"1", timeout=5)
        assert [m.data for m in stream.get_msgs(batch=10, timeout=5)] == [b"1"]
        sent = nc.stats.out_msgs
        os.kill(server.pid, signal.SIGSTOP)  # the request goes out but is never answered
        wait_for(lambda: all_threads_stopped(server.pid), message="the server did not stop")
        outcome = Outcome(lambda: stream.get_msgs(batch=10, timeout=CALL_TIMEOUT))
        wait_for(lambda: nc.stats.out_msgs > sent, message="the request was never written")
        server.kill()
        error = outcome.join()
        assert isinstance(error, js.ConnectionLostError), repr(error)
        assert outcome.elapsed < CALL_TIMEOUT / 3
        server.restart()
        wait_for(lambda: nc.is_connected, timeout=15)
        assert [m.data for m in stream.get_msgs(batch=10, timeout=10)] == [b"1"]
    finally:
        nc.close()


def test_jetstream_api_call_fails_when_the_server_dies(core_server):
    """A JetStream API call in flight raises ConnectionLostError when the server is killed."""
    nc = _connect(core_server)
    api = _connect(core_server)
    try:
        received = _silent_subscriber(api, "$JS.API.STREAM.INFO.ORDERS")
        ctx = nc.jetstream()
        outcome = Outcome(lambda: ctx.stream("ORDERS", timeout=CALL_TIMEOUT))
        assert received.wait(10), "the API request never reached the stand-in"
        core_server.kill()
        _assert_lost(outcome)
        core_server.restart()
        wait_for(lambda: nc.is_connected, timeout=15)
        nc.flush(timeout=5)
    finally:
        nc.close()
        api.close()


def test_every_waiting_request_fails_at_once(server):
    """Eight requests waiting on one silent responder all raise ConnectionLostError at the kill."""
    nc = _connect(server)
    responder = _connect(server)
    try:
        arrived = []
        all_there = threading.Event()

        def count(msg):
            arrived.append(msg)
            if len(arrived) == 8:
                all_there.set()

        responder.subscribe("svc.silent8", cb=count)
        responder.flush()
        outcomes = [
            Outcome(lambda: nc.request("svc.silent8", b"x", timeout=CALL_TIMEOUT)) for _ in range(8)
        ]
        assert all_there.wait(10), f"only {len(arrived)} requests reached the responder"
        server.kill()
        for outcome in outcomes:
            _assert_lost(outcome)
    finally:
        nc.close()
        responder.close()
