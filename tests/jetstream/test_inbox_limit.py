"""A pull (a fast batch, a push subscription) whose inbox the server refuses at its
max_subscriptions raises at once.

fetch(), next(), messages(), the Key-Value listings and watches, a columnar read
through a consumer and a fast-ingest batch each subscribe a fresh inbox for what
they wait for; a push subscription subscribes its deliver subject. A connection at its
subscription limit gets ``-ERR 'Maximum Subscriptions Exceeded'`` for that SUB:
nothing will ever come, so the pull raises :class:`MaxSubscriptionsExceededError`
as soon as the refusal is known, not an empty list or a ``TimeoutError`` at its
timeout. Once there is room, the next pull subscribes its inbox and gets messages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

#: Each connection's subscriptions: the requests' inbox and one more.
LIMIT = 2
#: The pulls' timeout; a refused pull raises well within FAST.
TIMEOUT = 20.0
FAST = 5.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server allowing each connection ``LIMIT`` subscriptions, with a stream
    ``FULL`` of one message, its durable pull consumer ``work``, a bucket ``cfg`` and a
    stream ``FAST`` that allows fast-ingest batches."""
    server = NatsServer(directory=tmp_path, extra_config=f"max_subscriptions: {LIMIT}").start()
    with js.connect(server.url) as admin:
        ctx = admin.jetstream()
        ctx.create_stream(name="FULL", subjects=["full.>"])
        ctx.publish("full.a", b"a")
        ctx.create_consumer("FULL", durable_name="work", ack_policy="explicit")
        ctx.create_key_value(bucket="cfg").put("color", b"red")
        ctx.create_stream(name="FAST", subjects=["fast.>"], allow_batched=True)
    yield server
    server.stop()


def raises_at_once(call: Callable[[], object]) -> None:
    """``call`` raises MaxSubscriptionsExceededError naming a refused inbox, within FAST."""
    started = time.monotonic()
    with pytest.raises(js.MaxSubscriptionsExceededError, match="_INBOX"):
        call()
    assert time.monotonic() - started < FAST


def test_a_pull_whose_inbox_is_refused_at_the_limit_raises_at_once(server: NatsServer):
    """The connection holds all its subscriptions: fetch, next, messages, keys and a watch
    raise MaxSubscriptionsExceededError at once, consume hands it to its error handler and
    stops (error_cb hears the inbox named); after an unsubscribe, a fetch gets the message."""
    errors: list[BaseException] = []
    with js.connect(server.url, error_cb=errors.append) as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        consumer = ctx.consumer("FULL", "work")  # the requests' inbox: one subscription
        kv = ctx.key_value("cfg")
        other = nc.subscribe("full.other")  # the other one
        nc.flush(timeout=FAST)
        raises_at_once(lambda: consumer.fetch(1, timeout=TIMEOUT))
        raises_at_once(lambda: consumer.next(timeout=TIMEOUT))
        with consumer.messages() as messages:
            raises_at_once(lambda: messages.next(timeout=TIMEOUT))
            raises_at_once(lambda: messages.next(timeout=TIMEOUT))  # it stays failed
        handled: list[BaseException] = []
        stopped = threading.Event()

        def handler(exc: BaseException) -> None:
            handled.append(exc)
            stopped.set()

        with consumer.consume(lambda msg: None, error_handler=handler) as consuming:
            assert stopped.wait(FAST)
            wait_for(lambda: consuming.closed, timeout=FAST)
        assert [type(e) for e in handled] == [js.MaxSubscriptionsExceededError]
        raises_at_once(lambda: kv.keys(timeout=TIMEOUT))
        with kv.watch() as watcher:
            raises_at_once(lambda: watcher.next(timeout=TIMEOUT))
        wait_for(
            lambda: any(
                isinstance(e, js.MaxSubscriptionsExceededError) and "'_INBOX." in str(e)
                for e in errors
            ),
            timeout=FAST,
            message="error_cb did not hear which inbox was refused",
        )
        other.unsubscribe()
        nc.flush(timeout=FAST)
        [msg] = consumer.fetch(1, timeout=TIMEOUT)
        assert msg.data == b"a"
        assert kv.keys(timeout=TIMEOUT) == ["color"]


def test_a_columnar_read_whose_inbox_is_refused_at_the_limit_raises_at_once(server: NatsServer):
    """read_arrow of a stream without allow_direct pulls through an ephemeral consumer on
    a fresh inbox: refused at the limit, it raises MaxSubscriptionsExceededError at once,
    not a JetStreamError at its timeout; after an unsubscribe it reads the message."""
    pytest.importorskip("pyarrow")
    with js.connect(server.url) as nc:
        stream = nc.jetstream(timeout=TIMEOUT).stream("FULL")  # the requests' inbox
        other = nc.subscribe("full.other")
        nc.flush(timeout=FAST)
        raises_at_once(lambda: list(stream.read_arrow(timeout=TIMEOUT)))
        other.unsubscribe()
        nc.flush(timeout=FAST)
        [batch] = list(stream.read_arrow(timeout=TIMEOUT))
        assert batch.column("data").to_pylist() == [b"a"]


def test_a_fast_batch_whose_inbox_is_refused_at_the_limit_raises_at_once(server: NatsServer):
    """A fast batch's first message waits for the stream's answer on the batch's inbox:
    refused at the limit, add() raises MaxSubscriptionsExceededError at once, not a
    TimeoutError at its timeout; after an unsubscribe a new batch commits."""
    with js.connect(server.url) as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        ctx.account_info()  # the requests' inbox
        other = nc.subscribe("fast.other")
        nc.flush(timeout=FAST)
        with ctx.fast_batch() as batch:
            raises_at_once(lambda: batch.add("fast.a", b"1"))
        other.unsubscribe()
        nc.flush(timeout=FAST)
        with ctx.fast_batch() as batch:
            batch.add("fast.a", b"1")
            assert batch.commit().batch_size == 1


def test_a_push_subscription_refused_at_the_limit_raises_at_once(server: NatsServer):
    """ctx.subscribe's SUB of the push consumer's deliver subject, refused at the limit:
    next_msg() and iterating raise MaxSubscriptionsExceededError at once, not a
    TimeoutError at the timeout (nor an iteration that ends as if unsubscribed)."""
    with js.connect(server.url) as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        ctx.account_info()  # the requests' inbox
        other = nc.subscribe("full.other")
        nc.flush(timeout=FAST)
        push = ctx.subscribe("full.a")
        started = time.monotonic()
        with pytest.raises(js.MaxSubscriptionsExceededError):
            push.next_msg(timeout=TIMEOUT)
        with pytest.raises(js.MaxSubscriptionsExceededError):
            next(iter(push))
        assert time.monotonic() - started < FAST
        push.unsubscribe()
        other.unsubscribe()
