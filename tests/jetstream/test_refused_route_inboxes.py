"""Batched direct gets and publish_arrow whose reply inbox the server refuses by permission.

Both take their replies on one wildcard inbox of the client (a reply route),
subscribed at first use. A user who may not subscribe to that inbox's prefix
gets ``-ERR 'Permissions Violation for Subscription to "<inbox>.*"'``: no reply
can come, so what waits fails at once with :class:`PermissionViolationError`
naming the inbox, not at its timeout, and a later call on that connection
raises it before sending anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.permissions import permissions_server, user_url
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

#: The calls' timeout; a refusal must come well within FAST.
TIMEOUT = 20.0
FAST = 5.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    with permissions_server(tmp_path) as started:
        yield started


def inbox_refused(call: Callable[[], object]) -> BaseException:
    """``call`` raises, within FAST; the error, for the caller to look at."""
    started = time.monotonic()
    with pytest.raises(js.NatsError) as caught:
        call()
    assert time.monotonic() - started < FAST
    return caught.value


def assert_names_the_inbox(error: BaseException) -> None:
    assert isinstance(error, js.PermissionViolationError)
    assert error.operation == "subscription"
    assert error.subject.startswith("_INBOX.") and error.subject.endswith(".*")


def test_a_batched_direct_get_whose_inbox_is_refused_raises_at_once(server: NatsServer):
    """app2 may subscribe only to _INBOX_app2.>: get_msgs raises PermissionViolationError
    for the batches' inbox at once, and the next call raises it before sending; after a
    reconnect, whose re-subscription the server refuses again, so does the next."""
    errors: list[BaseException] = []
    options = {"error_cb": errors.append, "reconnect_time_wait": 0.1}
    with js.connect(user_url(server, "app2"), **options) as nc:
        stream = nc.jetstream(timeout=TIMEOUT).stream_no_info("ORDERS")
        for _ in range(2):
            assert_names_the_inbox(inbox_refused(lambda: stream.get_msgs(1, 5, timeout=TIMEOUT)))
        server.restart()
        wait_for(lambda: sum(isinstance(e, js.PermissionViolationError) for e in errors) == 2)
        assert nc.stats.reconnects == 1
        assert_names_the_inbox(inbox_refused(lambda: stream.get_msgs(1, 5, timeout=TIMEOUT)))


def test_a_columnar_publish_whose_ack_inbox_is_refused_raises_at_once(server: NatsServer):
    """app2 may subscribe only to _INBOX_app2.>: publish_arrow raises RowPublishError with
    the PermissionViolationError of its acks' inbox at once; the next call raises that
    error before sending."""
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"data": [b"a", b"b"]})
    with js.connect(user_url(server, "app2")) as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        first = inbox_refused(lambda: ctx.publish_arrow(table, "orders.arrow"))
        assert isinstance(first, js.RowPublishError)
        assert "PermissionViolationError" in str(first) and "Subscription" in str(first)
        assert_names_the_inbox(inbox_refused(lambda: ctx.publish_arrow(table, "orders.arrow")))
