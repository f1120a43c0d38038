"""Request/reply, no responders, flush and timeouts against a real server."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync as js
from tests.fixtures.raw_client import RawClient


def test_request_reply(nc):
    """A request gets the responder's reply, headers included."""
    nc.subscribe("svc.echo", cb=lambda m: m.respond(m.data.upper(), headers={"X": "1"}))
    reply = nc.request("svc.echo", b"ping", timeout=2)
    assert reply.data == b"PING"
    assert reply.headers["X"] == "1"


def test_request_headers_reach_the_responder(nc):
    """Headers sent with a request arrive at the responder."""
    nc.subscribe("svc.hdr", cb=lambda m: m.respond(m.headers["Q"].encode()))
    assert nc.request("svc.hdr", headers={"Q": "value"}, timeout=2).data == b"value"


def test_many_requests_share_one_inbox_subscription(nc):
    """Sequential requests are muxed over one wildcard inbox."""
    nc.subscribe("svc.count", cb=lambda m: m.respond(m.data))
    for i in range(200):
        assert nc.request("svc.count", str(i), timeout=2).data == str(i).encode()


def test_no_responders_fails_at_once(nc):
    """A request nobody listens to raises NoRespondersError naming the subject, not a timeout."""
    with pytest.raises(js.NoRespondersError, match="nobody.home") as caught:
        nc.request("nobody.home", b"x", timeout=5)
    assert caught.value.subject == "nobody.home"


def test_a_503_reply_with_a_body_is_a_reply(nc, shared_server):
    """A responder's reply with status 503 and a body is returned, not NoRespondersError:
    only the server's empty 503 means nobody listens (as nats.go and nats.rs read it)."""
    incoming = nc.subscribe("svc.busy")
    outcome = {}

    def ask():
        try:
            outcome["reply"] = nc.request("svc.busy", b"q", timeout=10)
        except js.NatsError as exc:
            outcome["error"] = exc

    asker = threading.Thread(target=ask)
    asker.start()
    request = incoming.next_msg(timeout=5)
    raw = RawClient(shared_server.port)
    block = b"NATS/1.0 503 Busy\r\n\r\n"
    raw.send(
        b"HPUB %s %d %d\r\n%sretry later\r\n"
        % (request.reply.encode(), len(block), len(block) + 11, block)
    )
    asker.join()
    raw.close()
    assert "error" not in outcome
    reply = outcome["reply"]
    assert (reply.status, reply.description, reply.data) == (503, "Busy", b"retry later")


def test_request_timeout_is_builtin_timeout(nc):
    """A responder that never answers makes request raise TimeoutError (builtin too)."""
    nc.subscribe("svc.silent")
    nc.flush()
    with pytest.raises(TimeoutError) as info:
        nc.request("svc.silent", b"x", timeout=0.2)
    assert isinstance(info.value, js.TimeoutError)


def test_respond_without_reply_raises(nc):
    """respond() on a message without a reply subject raises NatsError."""
    sub = nc.subscribe("no.reply")
    nc.publish("no.reply", b"x")
    with pytest.raises(js.NatsError):
        sub.next_msg(timeout=2).respond(b"y")


def test_flush_and_rtt(nc):
    """flush returns once the server has everything; rtt is a positive duration."""
    for _ in range(1000):
        nc.publish("flush.me", b"x")
    nc.flush(timeout=5)
    assert 0 < nc.rtt() < 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_bad_timeouts_are_rejected(nc, bad):
    """A timeout that is not a positive finite number raises ValueError naming it."""
    with pytest.raises(ValueError, match="timeout"):
        nc.request("svc.echo", b"x", timeout=bad)
