"""A push subscription whose deliver subject the server refuses by permission ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.server import NatsServer

#: A refused subscription raises well within this (its timeout is ten times longer).
SOON = 2.0

_AUTH = (
    "authorization { users: [ {user: u, password: p, permissions: "
    '{subscribe: {deny: ["secret.>"]}}} ] }'
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server whose user ``u`` may not subscribe to ``secret.>``."""
    server = NatsServer(directory=tmp_path, extra_config=_AUTH).start()
    yield server
    server.stop()


def test_a_refused_deliver_subject_raises(server):
    """js.subscribe() with a deliver subject the user may not subscribe to: next_msg
    and iteration raise PermissionViolationError at once, not at the timeout."""
    with js.connect(f"nats://u:p@127.0.0.1:{server.port}") as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="PUSH", subjects=["push.>"])
        config = js.ConsumerConfig(deliver_subject="secret.deliver")
        sub = ctx.subscribe("push.>", config=config)
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            sub.next_msg(timeout=10 * SOON)
        assert time.monotonic() - started < SOON
        assert caught.value.subject == "secret.deliver"  # type: ignore[attr-defined]
        with pytest.raises(js.PermissionViolationError):
            for _ in sub:
                pass
