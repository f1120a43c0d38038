"""At the server's max_subscriptions, a request whose reply inbox was refused raises at once.

The server refuses a SUB past the connection's limit with ``-ERR 'Maximum
Subscriptions Exceeded'`` and keeps the connection. The client's shared reply
inbox is one SUB like any other: when it is the refused one, every request
waiting on it raises :class:`MaxSubscriptionsExceededError` (not a
``TimeoutError`` at its deadline), and the next request subscribes the inbox
again. A user's SUB refused next to the inbox's must not fail the requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

LIMIT = 3
# A request that is refused must raise well before this.
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A JetStream server allowing each connection ``LIMIT`` subscriptions."""
    server = NatsServer(
        directory=tmp_path_factory.mktemp("max-subs"),
        extra_config=f"max_subscriptions: {LIMIT}",
    ).start()
    yield server
    server.stop()


@pytest.fixture
def errors() -> list[BaseException]:
    """What error_cb of the client under test received."""
    return []


@pytest.fixture
def nc(limited_server: NatsServer, errors: list[BaseException]) -> Iterator[js.Client]:
    """A client of the limited server whose error_cb collects into ``errors``."""
    client = js.connect(limited_server.url, error_cb=errors.append)
    yield client
    client.close()


@pytest.fixture
def echo(limited_server: NatsServer) -> Iterator[str]:
    """A responder on another connection: the subject it echoes on."""
    with js.connect(limited_server.url) as responder:
        responder.subscribe("echo", cb=lambda m: m.respond(m.data))
        responder.flush()
        yield "echo"


def _refusals(errors: list[BaseException]) -> int:
    return sum(isinstance(e, js.MaxSubscriptionsExceededError) for e in errors)


def test_a_request_at_the_limit_raises_then_works_once_a_subscription_is_freed(nc, echo, errors):
    """Subscriptions filling the limit before the first request: it raises at once; once one
    is freed, the next request subscribes the inbox again and is answered."""
    subs = [nc.subscribe(f"fill.{i}") for i in range(LIMIT)]
    nc.flush()
    started = time.monotonic()
    with pytest.raises(js.MaxSubscriptionsExceededError):
        nc.request(echo, b"x", timeout=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT / 2
    with pytest.raises(js.MaxSubscriptionsExceededError):  # each request tries again
        nc.request(echo, b"x", timeout=TIMEOUT)
    wait_for(lambda: _refusals(errors) == 2, message=lambda: repr(errors))
    subs[0].unsubscribe()
    assert nc.request(echo, b"back", timeout=TIMEOUT).data == b"back"
    assert nc.is_connected


def test_a_jetstream_call_at_the_limit_raises_max_subscriptions_exceeded(nc):
    """A JetStream API call, a request too, raises the same error."""
    for i in range(LIMIT):
        nc.subscribe(f"fill.{i}")
    started = time.monotonic()
    with pytest.raises(js.MaxSubscriptionsExceededError):
        nc.jetstream(timeout=TIMEOUT).account_info()
    assert time.monotonic() - started < TIMEOUT / 2


def test_every_waiting_request_raises(nc, echo):
    """Requests from several threads waiting on the refused inbox all raise."""
    for i in range(LIMIT):
        nc.subscribe(f"fill.{i}")
    raised: list[BaseException] = []

    def call() -> None:
        try:
            nc.request(echo, b"x", timeout=TIMEOUT)
        except BaseException as exc:  # inspected below
            raised.append(exc)

    threads = [threading.Thread(target=call, name=f"test-requester-{i}") for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT + 5)
    assert not any(thread.is_alive() for thread in threads)
    assert len(raised) == 4
    assert all(isinstance(e, js.MaxSubscriptionsExceededError) for e in raised), raised


def test_a_subscription_refused_after_the_inbox_leaves_requests_working(nc, echo, errors):
    """The inbox first, then subscriptions past the limit: only those are refused (error_cb);
    requests go on being answered."""
    assert nc.request(echo, b"1", timeout=TIMEOUT).data == b"1"
    for i in range(LIMIT):  # the last one is past the limit
        nc.subscribe(f"fill.{i}")
    wait_for(lambda: _refusals(errors) == 1, message=lambda: repr(errors))
    assert nc.request(echo, b"2", timeout=TIMEOUT).data == b"2"


def test_a_refusal_just_before_the_inbox_is_not_taken_for_its_own(nc, echo, errors):
    """A user's SUB refused, a subscription freed, then the inbox's SUB, all sent back to
    back: the inbox is accepted and the request answered, not failed by the earlier -ERR."""
    subs = [nc.subscribe(f"fill.{i}") for i in range(LIMIT)]
    nc.subscribe("refused")  # past the limit
    subs[0].unsubscribe()  # frees the room the inbox takes
    assert nc.request(echo, b"x", timeout=TIMEOUT).data == b"x"
    wait_for(lambda: _refusals(errors) == 1, message=lambda: repr(errors))
    assert nc.request(echo, b"y", timeout=TIMEOUT).data == b"y"
