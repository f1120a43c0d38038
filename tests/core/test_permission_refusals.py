"""Requests the server refuses by permission fail at once, typed, never at their timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as js
from tests.fixtures.permissions import permissions_server, user_url
from tests.fixtures.server import NatsServer

#: A refused request answers well within this (its timeout is ten times longer).
FAST = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with permissions_server(tmp_path_factory.mktemp("perms")) as started:
        yield started


def test_a_request_to_a_refused_subject_raises_permission_violation_at_once(server: NatsServer):
    """A request published where the user may not publish raises PermissionViolationError
    naming the subject, long before its timeout; the connection stays up."""
    errors: list[BaseException] = []
    with js.connect(user_url(server, "publisher"), error_cb=errors.append) as nc:
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            nc.request("secret.plans", b"x", timeout=10 * FAST)
        assert time.monotonic() - started < FAST
        assert (caught.value.operation, caught.value.subject) == ("publish", "secret.plans")
        nc.flush()
        assert nc.is_connected and nc.stats.reconnects == 0


def test_only_the_refused_request_fails(server: NatsServer):
    """Requests to refused and allowed subjects from many threads: each refused one fails,
    the others are answered."""
    with js.connect(user_url(server, "app1"), inbox_prefix="_INBOX_app1") as nc:
        nc.subscribe("svc.echo", cb=lambda msg: msg.respond(msg.data))
        nc.flush()
        outcomes: dict[int, object] = {}

        def ask(i: int) -> None:
            subject = "svc.echo" if i % 2 else "forbidden.echo"
            try:
                outcomes[i] = nc.request(subject, b"%d" % i, timeout=10 * FAST).data
            except js.PermissionViolationError as exc:
                outcomes[i] = exc.subject

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(20)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.monotonic() - started < FAST
        assert outcomes == {i: b"%d" % i if i % 2 else "forbidden.echo" for i in range(20)}


def test_a_refused_reply_inbox_fails_requests_at_once(tmp_path: Path, server: NatsServer):
    """The user may not subscribe to the inbox prefix: a request raises
    PermissionViolationError naming the inbox, not a TimeoutError, and so does the next."""
    with js.connect(user_url(server, "app1")) as nc:  # may subscribe only _INBOX_app1.>
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(js.PermissionViolationError) as caught:
                nc.request("svc.echo", b"", timeout=10 * FAST)
            assert time.monotonic() - started < FAST
            assert caught.value.operation == "subscription"
            assert caught.value.subject.startswith("_INBOX.")


def test_an_inbox_refusal_read_before_the_inbox_is_set_up_fails_the_request(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
):
    """The server's -ERR for the requests' inbox SUB may be read (on the reader thread)
    before the requesting thread has recorded that inbox: the request raises it all
    the same, at once.

    The inbox's subscribing is made to end only once the reader is handling that -ERR,
    the order a busy machine may give; the refusal used to be dropped (no inbox yet)
    and the request waited for its whole timeout."""
    with js.connect(user_url(server, "app1")) as nc:
        conn = nc._connection
        subscribe_inbox, permission_refused = conn._subscribe_inbox, conn._permission_refused
        read = threading.Event()

        def reading(error: BaseException) -> None:
            read.set()
            permission_refused(error)

        def subscribe_then_read(mux: Any) -> Any:
            subscribe_inbox(mux)
            assert read.wait(FAST), "the SUB of the inbox was not refused"
            return mux

        monkeypatch.setattr(conn, "_permission_refused", reading)
        monkeypatch.setattr(conn, "_subscribe_inbox", subscribe_then_read)
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            nc.request("svc.echo", b"", timeout=10 * FAST)
        assert time.monotonic() - started < 2 * FAST
        assert caught.value.operation == "subscription"
        assert caught.value.subject.startswith("_INBOX.")
