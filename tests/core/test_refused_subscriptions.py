"""A subscription the server refuses by permission ends: it raises, it is not re-sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST, Events
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

#: A refused subscription raises well within this (its timeout is ten times longer).
SOON = 2.0

_AUTH = (
    "authorization { users: [ {user: u, password: p, permissions: {subscribe: "
    '{allow: ["open.>", "secret.>", "_INBOX.>"], deny: ["secret.>"]}}}, '
    '{user: q, password: p, permissions: {subscribe: {allow: ["jobs.>", "jobs.> workers"]}}} ] }'
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A core server whose user ``u`` may not subscribe to ``secret.>``, and ``q`` may
    subscribe to ``jobs.>`` only outside a queue group or in the group ``workers``."""
    server = NatsServer(jetstream=False, directory=tmp_path, extra_config=_AUTH).start()
    yield server
    server.stop()


def _url(server: NatsServer, user: str = "u") -> str:
    return f"nats://{user}:p@127.0.0.1:{server.port}"


def _refused(events: Events) -> list[BaseException]:
    return events.errors_of(js.PermissionViolationError)


def test_next_msg_raises_at_once(server, events):
    """next_msg(timeout=None) of a refused subscription raises PermissionViolationError
    naming it, and error_cb gets the error once."""
    with js.connect(_url(server), **events.callbacks()) as nc:
        sub = nc.subscribe("secret.x")
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            sub.next_msg(timeout=10 * SOON)
        assert time.monotonic() - started < SOON
        assert (caught.value.operation, caught.value.subject) == ("subscription", "secret.x")
        assert not sub.is_active
        assert sub not in nc._connection.subscriptions()
        with pytest.raises(js.PermissionViolationError):
            sub.next_msgs(timeout=None)
        wait_for(lambda: _refused(events))
        assert [e.subject for e in _refused(events)] == ["secret.x"]  # type: ignore[attr-defined]


def test_iteration_ends_with_the_error(server):
    """Iterating a refused subscription raises PermissionViolationError."""
    with js.connect(_url(server)) as nc:
        sub = nc.subscribe("secret.y")
        with pytest.raises(js.PermissionViolationError):
            for _ in sub:
                pass


def test_a_callback_subscription_thread_ends(server):
    """The callback thread of a refused subscription ends."""
    with js.connect(_url(server)) as nc:
        sub = nc.subscribe("secret.cb", cb=lambda msg: None)
        worker = sub._worker
        assert worker is not None
        wait_for(lambda: not sub.is_active)
        assert worker.join(timeout=SOON)
        assert f"jetstream_sync-sub-{sub.sid}" not in [t.name for t in threading.enumerate()]


def test_an_allowed_subscription_keeps_working(server):
    """A refusal ends only the subscription it names: another subject still receives."""
    with js.connect(_url(server)) as nc:
        allowed = nc.subscribe("open.a")
        refused = nc.subscribe("secret.z")
        with pytest.raises(js.PermissionViolationError):
            refused.next_msg(timeout=10 * SOON)
        nc.publish("open.a", b"hi")
        assert allowed.next_msg(timeout=SOON).data == b"hi"
        assert allowed.is_active


def test_a_queue_subscription_is_matched_by_its_queue(server):
    """Refused only in the queue group ``other``: that subscription ends, the one on the
    same subject without a group and the one in ``workers`` keep receiving."""
    with js.connect(_url(server, "q")) as nc:
        plain = nc.subscribe("jobs.1")
        workers = nc.subscribe("jobs.1", queue="workers")
        other = nc.subscribe("jobs.1", queue="other")
        with pytest.raises(js.PermissionViolationError) as caught:
            other.next_msg(timeout=10 * SOON)
        assert caught.value.queue == "other"  # type: ignore[attr-defined]
        nc.publish("jobs.1", b"job")
        assert plain.next_msg(timeout=SOON).data == b"job"
        assert workers.next_msg(timeout=SOON).data == b"job"
        assert plain.is_active and workers.is_active


def test_a_refused_subscription_is_not_sent_again_after_a_reconnect(server, events):
    """After the server restarts, the refused subscription is not sent again (no second
    refusal) and the allowed one still receives."""
    with js.connect(_url(server), name="refused", **FAST, **events.callbacks()) as nc:
        allowed = nc.subscribe("open.b")
        refused = nc.subscribe("secret.r")
        with pytest.raises(js.PermissionViolationError):
            refused.next_msg(timeout=10 * SOON)
        wait_for(lambda: _refused(events))
        server.stop()
        events.wait(lambda e: e.disconnects == 1)
        server.start()
        events.wait(lambda e: e.reconnects == 1)
        nc.flush(timeout=5)
        conns = server.monitor("connz", subs="detail")["connections"]
        [conn] = [c for c in conns if c.get("name") == "refused"]
        subjects = [s["subject"] for s in conn.get("subscriptions_list_detail") or []]
        assert "secret.r" not in subjects and "open.b" in subjects
        nc.publish("open.b", b"again")
        assert allowed.next_msg(timeout=SOON).data == b"again"
        assert len(_refused(events)) == 1
