"""Every bad input of the table in ``docs/errors.md`` ("Bad input") is refused before sending.

One row per refused input: the call, the typed error it raises. The one
test runs each row against a live connection and checks that nothing reached
the server: the client's ``msgs_out`` is unchanged, its ``bytes_out`` grew by
the two ``flush()`` PINGs only, and a second connection subscribed to ``>``
saw nothing. Rows cite the tests that cover an area in depth
(``test_client_input.py``, ``test_subject_roles.py``, ``test_headers_input.py``,
``test_kv_config.py``...).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync.errors import (
    BadHeaderError,
    BadSubjectError,
    InvalidBucketNameError,
    InvalidKeyError,
    InvalidObjectNameError,
    InvalidObjectStoreNameError,
    LimitExceededError,
    MaxPayloadError,
    NKeyError,
    PriorityGroupError,
)
from tests.fixtures.server import NatsServer

MAX_PAYLOAD = 64 * 1024


async def _async_handler(msg: Any) -> None:
    """A coroutine function, refused where the client would call it on a thread."""


@dataclass
class Env:
    """What a row may call: a client, its context, a stream, consumer, bucket and store."""

    url: str
    nc: js.Client
    ctx: Any
    stream: Any
    consumer: Any
    kv: Any
    obj: Any
    sub: Any


@dataclass(frozen=True)
class Row:
    """One refused input: ``call(env)`` must raise ``error`` and send nothing."""

    id: str
    call: Callable[[Env], object]
    error: type[BaseException]


NAN = math.nan
LONG_NAME = "N" * 256
BIG = b"x" * (MAX_PAYLOAD + 1)

ROWS = [
    # -- subjects (test_client_input.py, test_subject_roles.py)
    Row("publish-empty-subject", lambda e: e.nc.publish("", b"x"), BadSubjectError),
    Row("publish-space", lambda e: e.nc.publish("a b", b"x"), BadSubjectError),
    Row("publish-empty-token", lambda e: e.nc.publish("a..b", b"x"), BadSubjectError),
    Row("publish-wildcard", lambda e: e.nc.publish("a.*", b"x"), BadSubjectError),
    Row("publish-not-str", lambda e: e.nc.publish(b"a", b"x"), BadSubjectError),
    Row("reply-wildcard", lambda e: e.nc.publish("a", b"x", reply="r.>"), BadSubjectError),
    Row("request-subject", lambda e: e.nc.request("a\tb", b"x", timeout=1), BadSubjectError),
    Row("subscribe-gt-not-last", lambda e: e.nc.subscribe("a.>.b"), BadSubjectError),
    Row("subscribe-queue", lambda e: e.nc.subscribe("a", queue="q q"), BadSubjectError),
    Row("js-publish-wildcard", lambda e: e.ctx.publish("a.>", b"x"), BadSubjectError),
    Row("js-publish-async-space", lambda e: e.ctx.publish_async("a b", b"x"), BadSubjectError),
    Row(
        "stream-subjects",
        lambda e: e.ctx.create_stream(name="BADSUBJ", subjects=["a..b"]),
        BadSubjectError,
    ),
    Row(
        "consumer-filter",
        lambda e: e.stream.create_consumer(filter_subject="a.>.b"),
        BadSubjectError,
    ),
    Row(
        "deliver-subject-wildcard",
        lambda e: e.stream.create_consumer(durable_name="push", deliver_subject="in.*"),
        BadSubjectError,
    ),
    Row(
        "last-msg-for-subject",
        lambda e: e.stream.get_last_msg_for_subject("a b"),
        BadSubjectError,
    ),
    # -- stream and consumer names
    Row("stream-name-empty", lambda e: e.ctx.create_stream(name="", subjects=["x"]), ValueError),
    Row("stream-name-dot", lambda e: e.ctx.stream("a.b"), ValueError),
    Row("stream-name-slash", lambda e: e.ctx.delete_stream("a/b"), ValueError),
    Row("stream-name-too-long", lambda e: e.ctx.stream(LONG_NAME), LimitExceededError),
    Row("consumer-name-space", lambda e: e.stream.consumer("a b"), ValueError),
    Row("durable-name-wildcard", lambda e: e.stream.create_consumer(durable_name="a*"), ValueError),
    # -- Key-Value buckets and keys (test_kv.py, test_kv_config.py)
    Row("kv-bucket-dot", lambda e: e.ctx.key_value("a.b"), InvalidBucketNameError),
    Row(
        "kv-create-bucket-space",
        lambda e: e.ctx.create_key_value(bucket="a b"),
        InvalidBucketNameError,
    ),
    Row("kv-key-empty-token", lambda e: e.kv.put("a..b", b"v"), InvalidKeyError),
    Row("kv-key-leading-dot", lambda e: e.kv.get(".a"), InvalidKeyError),
    Row("kv-key-wildcard", lambda e: e.kv.put("a.*", b"v"), InvalidKeyError),
    Row("kv-key-space", lambda e: e.kv.delete("a b"), InvalidKeyError),
    Row("kv-watch-filter", lambda e: e.kv.watch("a.>.b"), InvalidKeyError),
    Row("kv-value-too-big", lambda e: e.kv.put("k", BIG), MaxPayloadError),
    # -- Object Store (test_object_store.py)
    Row(
        "obj-bucket-dot",
        lambda e: e.ctx.create_object_store(bucket="a.b"),
        InvalidObjectStoreNameError,
    ),
    Row("obj-name-empty", lambda e: e.obj.put("", b"x"), InvalidObjectNameError),
    Row("obj-name-not-str", lambda e: e.obj.get(5), InvalidObjectNameError),
    # -- headers (test_client_input.py, test_headers_input.py)
    Row("header-key-space", lambda e: e.nc.publish("a", headers={"K K": "v"}), BadHeaderError),
    Row("header-key-colon", lambda e: e.nc.publish("a", headers={"K:": "v"}), BadHeaderError),
    Row(
        "header-value-crlf",
        lambda e: e.ctx.publish("a", headers={"K": "v\r\nX: y"}),
        BadHeaderError,
    ),
    Row("header-value-bytes", lambda e: e.nc.publish("a", headers={"K": b"v"}), TypeError),
    Row("headers-not-mapping", lambda e: e.nc.publish("a", headers=[("K", "v")]), TypeError),
    # -- callbacks (test_client_input.py)
    Row("subscribe-cb-not-callable", lambda e: e.nc.subscribe("a", cb="handler"), TypeError),
    Row("subscribe-cb-async", lambda e: e.nc.subscribe("a", cb=_async_handler), TypeError),
    Row("consume-cb-not-callable", lambda e: e.consumer.consume("handler"), TypeError),
    Row("consume-cb-async", lambda e: e.consumer.consume(_async_handler), TypeError),
    Row(
        "consume-error-handler-async",
        lambda e: e.consumer.consume(print, error_handler=_async_handler),
        TypeError,
    ),
    Row("js-subscribe-cb-not-callable", lambda e: e.ctx.subscribe("bad.a", cb=5), TypeError),
    Row(
        "js-subscribe-bind-cb-async",
        lambda e: e.ctx.subscribe_bind("BAD", "reader", cb=_async_handler),
        TypeError,
    ),
    # -- payloads (test_client_input.py)
    Row("payload-int", lambda e: e.nc.publish("a", 5), TypeError),
    Row("js-publish-payload-none", lambda e: e.ctx.publish("a", None), TypeError),
    Row("kv-value-int", lambda e: e.kv.put("k", 5), TypeError),
    Row("payload-too-big", lambda e: e.nc.publish("a", BIG), MaxPayloadError),
    Row(
        "headers-and-payload-too-big",
        lambda e: e.nc.publish("a", BIG[:-10], headers={"Key": "value"}),
        MaxPayloadError,
    ),
    Row("js-publish-too-big", lambda e: e.ctx.publish("a", BIG), MaxPayloadError),
    Row("request-too-big", lambda e: e.nc.request("a", BIG), MaxPayloadError),
    # -- timeouts
    Row("request-timeout-nan", lambda e: e.nc.request("a", timeout=NAN), ValueError),
    Row("request-timeout-zero", lambda e: e.nc.request("a", timeout=0), ValueError),
    Row("request-timeout-negative", lambda e: e.nc.request("a", timeout=-1), ValueError),
    Row("request-timeout-str", lambda e: e.nc.request("a", timeout="1"), TypeError),
    Row("flush-timeout-inf", lambda e: e.nc.flush(timeout=math.inf), ValueError),
    Row("publish-timeout-zero", lambda e: e.nc.publish("a", timeout=0), ValueError),
    Row("js-publish-timeout-nan", lambda e: e.ctx.publish("a", timeout=NAN), ValueError),
    Row("js-context-timeout-bool", lambda e: e.nc.jetstream(timeout=True), TypeError),
    Row("fetch-timeout-negative", lambda e: e.consumer.fetch(1, timeout=-1), ValueError),
    Row("next-msg-timeout-zero", lambda e: e.sub.next_msg(timeout=0), ValueError),
    Row("kv-get-timeout-nan", lambda e: e.kv.get("k", timeout=NAN), ValueError),
    Row("connect-timeout-zero", lambda e: js.connect(e.url, connect_timeout=0), ValueError),
    Row("fetch-timeout-past-292-years", lambda e: e.consumer.fetch(1, timeout=1e20), ValueError),
    Row(
        "ping-interval-past-292-years", lambda e: js.connect(e.url, ping_interval=1e20), ValueError
    ),
    # -- config values
    Row(
        "replicas-over-5",
        lambda e: e.ctx.create_stream(name="REPL", subjects=["repl"], num_replicas=6),
        ValueError,
    ),
    Row(
        "duplicate-window-too-short",
        lambda e: e.ctx.create_stream(name="DUPW", subjects=["dupw"], duplicate_window=0.01),
        ValueError,
    ),
    Row(
        "description-too-long",
        lambda e: e.ctx.create_stream(name="DESC", subjects=["desc"], description="d" * 5000),
        ValueError,
    ),
    Row("kv-history-over-64", lambda e: e.ctx.create_key_value(bucket="H", history=65), ValueError),
    Row("ttl-under-1s", lambda e: e.ctx.publish("a", b"x", ttl=0.5), ValueError),
    Row("ttl-infinite", lambda e: e.ctx.publish("a", b"x", ttl=math.inf), ValueError),
    Row("ttl-past-292-years", lambda e: e.ctx.publish("a", b"x", ttl=1e20), ValueError),
    Row(
        "max-age-past-292-years",
        lambda e: e.ctx.create_stream(name="AGE", subjects=["age"], max_age=1e20),
        ValueError,
    ),
    Row(
        "backoff-past-292-years",
        lambda e: e.stream.create_consumer(backoff=[1.0, 1e20], max_deliver=3),
        ValueError,
    ),
    Row(
        "schedule-every-infinite",
        lambda e: e.ctx.schedule("a.s", "a.t", every=math.inf),
        ValueError,
    ),
    Row(
        "schedule-every-past-go-duration",
        lambda e: e.ctx.schedule("a.s", "a.t", every=1e10),
        ValueError,
    ),
    Row(
        "schedule-at-past-2262",
        lambda e: e.ctx.schedule("a.s", "a.t", at=datetime(9999, 12, 31, tzinfo=UTC)),
        ValueError,
    ),
    Row("fetch-batch-zero", lambda e: e.consumer.fetch(0), ValueError),
    Row("fetch-batch-past-int64", lambda e: e.consumer.fetch(2**63), ValueError),
    Row(
        "fetch-min-pending-past-int64",
        lambda e: e.consumer.fetch(1, group="g", min_pending=2**63),
        PriorityGroupError,
    ),
    Row("messages-expires-short", lambda e: e.consumer.messages(expires=0.5), ValueError),
    Row("get-msgs-batch-zero", lambda e: e.stream.get_msgs(batch=0), ValueError),
    Row("get-msgs-subject-empty", lambda e: e.stream.get_msgs(subject=""), BadSubjectError),
    Row("info-subjects-filter-empty", lambda e: e.stream.info(subjects_filter=""), BadSubjectError),
    Row("unsubscribe-limit-zero", lambda e: e.sub.unsubscribe(limit=0), ValueError),
    Row(
        "unsubscribe-limit-past-server",
        lambda e: e.sub.unsubscribe(limit=1_000_000_000),
        ValueError,
    ),
    Row("publish-batch-empty", lambda e: e.ctx.publish_batch([]), ValueError),
    Row(
        "publish-batch-own-header",
        lambda e: e.ctx.publish_batch([("a", b"x", {"Nats-Batch-Commit": "1"}), ("a", b"y")]),
        ValueError,
    ),
    Row(
        "publish-batch-item-shape",
        lambda e: e.ctx.publish_batch([("a", b"x"), ("a", b"y", None, "z")]),
        TypeError,
    ),
    Row(
        "publish-batch-subject-check-written",
        lambda e: e.ctx.publish_batch(
            [("a", b"x"), ("a", b"y", {"Nats-Expected-Last-Subject-Sequence": "0"})]
        ),
        ValueError,
    ),
    Row("max-ack-inflight-zero", lambda e: e.nc.jetstream(max_ack_inflight=0), ValueError),
    Row("domain-dot", lambda e: e.nc.jetstream(domain="a.b"), BadSubjectError),
    Row(
        "stream-max-msgs-below-minus-1",
        lambda e: e.ctx.create_stream(name="MM", subjects=["mm"], max_msgs=-5),
        ValueError,
    ),
    Row("ack-wait-negative", lambda e: e.stream.create_consumer(ack_wait=-1), ValueError),
    Row("kv-create-ttl-under-1s", lambda e: e.kv.create("k2", b"v", ttl=0.1), ValueError),
    Row("kv-create-ttl-infinite", lambda e: e.kv.create("k2", b"v", ttl=math.inf), ValueError),
    Row("kv-update-last-negative", lambda e: e.kv.update("k", b"v", last=-1), ValueError),
    # -- sequences
    Row("get-msg-seq-zero", lambda e: e.stream.get_msg(0), ValueError),
    Row("direct-get-seq-negative", lambda e: e.stream.direct_get(-1), ValueError),
    Row("delete-msg-seq-float", lambda e: e.stream.delete_msg(1.5), TypeError),
    Row("get-msgs-start-seq-zero", lambda e: e.stream.get_msgs(start_seq=0), ValueError),
    Row("purge-keep-negative", lambda e: e.stream.purge(keep=-1), ValueError),
    Row("get-msg-seq-past-64-bits", lambda e: e.stream.get_msg(2**64), ValueError),
    Row("purge-keep-past-64-bits", lambda e: e.stream.purge(keep=2**64), ValueError),
    Row("purge-seq-and-keep", lambda e: e.stream.purge(seq=2, keep=1), ValueError),
    Row(
        "expected-last-seq-negative",
        lambda e: e.ctx.publish("bad.a", b"x", expected_last_seq=-1),
        ValueError,
    ),
    Row(
        "expected-last-subject-seq-str",
        lambda e: e.ctx.publish("bad.a", b"x", expected_last_subject_seq="3"),
        TypeError,
    ),
    # -- connection options (checked when the client is built, before connecting)
    Row(
        "max-reconnect-attempts-str",
        lambda e: js.connect(e.url, max_reconnect_attempts="5"),
        TypeError,
    ),
    Row(
        "reconnect-time-wait-negative",
        lambda e: js.connect(e.url, reconnect_time_wait=-1),
        ValueError,
    ),
    Row(
        "reconnect-jitter-nan",
        lambda e: js.connect(e.url, reconnect_jitter=NAN),
        ValueError,
    ),
    Row(
        "max-outstanding-pings-zero",
        lambda e: js.connect(e.url, max_outstanding_pings=0),
        ValueError,
    ),
    Row("ping-interval-zero", lambda e: js.connect(e.url, ping_interval=0), ValueError),
    Row(
        "pending-msgs-limit-zero",
        lambda e: js.connect(e.url, pending_msgs_limit=0),
        ValueError,
    ),
    Row(
        "subscribe-pending-bytes-negative",
        lambda e: e.nc.subscribe("a", pending_bytes_limit=-1),
        ValueError,
    ),
    Row(
        "inbox-prefix-wildcard",
        lambda e: js.connect(e.url, inbox_prefix="_IN.>"),
        BadSubjectError,
    ),
    Row("server-url-scheme", lambda e: js.connect("http://127.0.0.1:4222"), ValueError),
    Row("server-url-port-zero", lambda e: js.connect("nats://127.0.0.1:0"), ValueError),
    Row("nkeys-seed-bad", lambda e: js.connect(e.url, nkeys_seed="SUBADSEED" * 7), NKeyError),
    # -- enum values
    Row(
        "retention-unknown",
        lambda e: e.ctx.create_stream(name="RET", subjects=["ret"], retention="forever"),
        ValueError,
    ),
    Row(
        "storage-unknown",
        lambda e: e.ctx.create_stream(name="STO", subjects=["sto"], storage="disk"),
        ValueError,
    ),
    Row(
        "ack-policy-unknown",
        lambda e: e.stream.create_consumer(ack_policy="sometimes"),
        ValueError,
    ),
    Row(
        "deliver-policy-unknown",
        lambda e: e.stream.create_consumer(deliver_policy="first"),
        ValueError,
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A server of this module only (its ``>`` subscriber sees nobody else's traffic).

    It never pings its clients during the module: the client's PONG would count in
    the bytes a row must not send.
    """
    directory: Path = tmp_path_factory.mktemp("bad-input")
    with NatsServer(
        directory=directory, max_payload=MAX_PAYLOAD, extra_config="ping_interval: 1h"
    ) as running:
        yield running


@pytest.fixture(scope="module")
def env(server: NatsServer) -> Iterator[Env]:
    """A client with a stream, a consumer, a KV bucket and an object store ready.

    It sends no keep-alive PING of its own during the module (see ``server``).
    """
    with js.connect(server.url, ping_interval=3600) as nc:
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="BAD", subjects=["bad.>"])
        consumer = stream.create_consumer(durable_name="reader")
        kv = ctx.create_key_value(bucket="badkv")
        obj = ctx.create_object_store(bucket="badobj")
        sub = nc.subscribe("bad.sub")
        # The request inbox and the async-ack inbox are subscribed by the first good
        # call (test_a_first_call_with_bad_input_subscribes_nothing): make them
        # exist now, so that each row is checked the same whatever ran before it.
        with pytest.raises(js.NoRespondersError):
            nc.request("nobody.here", b"", timeout=5)
        ctx.publish_async("bad.warm-up", b"").result(timeout=5)
        yield Env(server.url, nc, ctx, stream, consumer, kv, obj, sub)


@pytest.fixture(scope="module")
def spy(server: NatsServer) -> Iterator[Any]:
    """A subscription to ``>`` on a second connection: what reached the server."""
    with js.connect(server.url) as other:
        sub = other.subscribe(">")
        other.flush()
        yield other, sub


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_is_refused_before_sending(env: Env, spy: Any, row: Row) -> None:
    """The row's call raises its typed error, and nothing reaches the server."""
    other, watched = spy
    # What the module's other tests sent (they may run first, in any order) is not
    # the row's: it has reached the spy once its flush returns.
    other.flush()
    while watched.pending_msgs:
        watched.next_msg(timeout=1)
    nc = env.nc
    nc.flush()
    before = nc.stats
    with pytest.raises(row.error) as raised:
        row.call(env)
    assert type(raised.value) is row.error
    nc.flush()
    after = nc.stats
    other.flush()
    assert after.out_msgs == before.out_msgs
    # The flush's PING, and once in a while a PONG of the same six bytes: loaded runs of
    # the whole suite saw a PONG go out (the connection answered a PING) both here and in
    # a flush before. A PUB or HPUB shows in out_msgs and in the spy below; only a SUB or
    # UNSUB of exactly 6 bytes more would go unseen here, and none is that short.
    line = len(b"PING\r\n")
    assert after.out_bytes - before.out_bytes in (line, 2 * line), (before, after)
    seen = []
    while watched.pending_msgs:
        seen.append(watched.next_msg(timeout=1).subject)
    # the server's advisories about earlier setup can arrive late; what a call sends would
    # show up under its own subject
    sent = [subject for subject in seen if not subject.startswith("$JS.EVENT.ADVISORY.")]
    assert not sent, f"the server received {sent}"


def test_the_docs_table_has_exactly_these_rows() -> None:
    """docs/errors.md's bad-input table lists each row of ROWS once, and nothing else."""
    text = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    section = text.split("## Bad input", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(documented) == sorted(row.id for row in ROWS)
    assert len(set(documented)) == len(documented)


@pytest.mark.parametrize("call", ["request", "publish_async"])
def test_a_first_call_with_bad_input_subscribes_nothing(env: Env, call: str) -> None:
    """The inbox a first request / publish_async needs is not subscribed for bad input."""
    with js.connect(env.url) as nc:
        ctx = nc.jetstream()
        send = {
            "request": lambda subject: nc.request(subject, b"x", timeout=5),
            "publish_async": lambda subject: ctx.publish_async(subject, b"x").result(timeout=5),
        }[call]
        nc.flush()
        start = nc.stats.out_bytes
        nc.flush()
        before = nc.stats.out_bytes
        with pytest.raises(BadSubjectError):
            send("a b")
        nc.flush()
        assert nc.stats.out_bytes - before == before - start
        send("bad.first")  # stream BAD stores it: the first good call works
