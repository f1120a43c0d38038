"""The client refuses exactly what nats-server refuses, before sending (issue 28, item 4).

Each table sends every input twice: through the client's check, and raw to a
real server (bypassing that check). The verdicts must agree, except for the
rows in ``STRICTER``-style lists, which docs/errors.md ("Where the client is
stricter than the server") lists with the reason.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import jetstream_sync
from jetstream_sync._protocol import encode_headers
from jetstream_sync._subjects import is_publish_subject
from jetstream_sync.jetstream._names import check_consumer_name, check_stream_name
from jetstream_sync.jetstream.counter import increment_header
from jetstream_sync.jetstream.schedule import schedule_headers
from jetstream_sync.kv._keys import check_bucket, check_key
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.raw_client import RawClient


def _agree(client_takes: bool, server_takes: bool, why_stricter: str | None = None) -> None:
    """The client's verdict is the server's, or (with a reason) it refuses what the server takes."""
    if why_stricter is not None:
        assert server_takes and not client_takes, why_stricter
    else:
        assert client_takes == server_takes, f"client {client_takes}, server {server_takes}"


@contextlib.contextmanager
def _module_stream(server: Any, prefix: str, **config: Any) -> Iterator[tuple[Any, Any, str]]:
    """A connection, its JetStream context and a fresh stream ``<prefix>...`` with ``config``."""
    name = unique_stream_name(prefix)
    with jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream(timeout=30)
        js.create_stream(name=name, subjects=[f"{name}.>"], **config)
        try:
            yield nc, js, name
        finally:
            js.delete_stream(name)


def _server_verdict(
    nc: jetstream_sync.Client, subject: str, headers: dict[str, str], data: bytes = b"x"
) -> bool:
    """Whether the server stores a message with these headers (sent raw, unchecked)."""
    # A field with no values makes the server search five years second by second (~15 s).
    reply = nc.request(subject, data, timeout=120, headers=headers)
    return "error" not in json.loads(reply.data)


@pytest.fixture(scope="module")
def schedule_stream(shared_server):
    """A stream that takes schedules, on the suite's shared server."""
    with _module_stream(shared_server, "AGREE", allow_msg_schedules=True) as (nc, _, name):
        yield nc, name


# (pattern, time zone or None): what users type as cron= (and time_zone=).
CRON_CASES: list[tuple[str, str | None]] = [
    # the two the issue names
    ("0 0 0 ? * *", None),
    ("@every 5s", None),
    # predefined names
    ("@hourly", None), ("@daily", None), ("@yearly", None), ("@annually", None),
    ("@midnight", None), ("@weekly", None), ("@monthly", None), ("@fortnightly", None),
    ("@every 1m30s", None), ("@every 1.5s", None), ("@every 500ms", None), ("@every 1s", None),
    ("@every 0.999s", None), ("@every 5", None), ("@every -5s", None), ("@every 5x", None),
    ("@every 2h45m10s", None), ("@every .5h", None), ("@every 1000ms", None),
    ("@every", None), ("@every 5s", "UTC"),
    ("@at 2030-01-31T12:00:00Z", None), ("@at 2030-01-31T12:00:00+02:00", None),
    ("@at 2030-01-31T12:00:00.123Z", None), ("@at 2030-02-30T12:00:00Z", None),
    ("@at 2030-01-31 12:00:00Z", None), ("@at 2030-01-31T25:00:00Z", None),
    ("@at tomorrow", None), ("@at 2030-01-31T12:00:00Z", "UTC"),
    # six fields: items, ranges, steps, names, signs
    ("* * * * * *", None), ("0 0 * * * ?", None), ("? ? ? ? ? ?", None),
    ("0 */5 * * * *", None), ("0 5/15 * * * *", None), ("0 0 9-17 * * mon-fri", None),
    ("0 0 0 1 jan,jul *", None), ("0 0 0 * * SUN", None), ("0 0 0 1 JAN *", None),
    ("0 0 0 1-31/2 * *", None), ("+5 * * * * *", None), ("00 00 00 01 01 *", None),
    ("0 0 0 1,,15 * *", None), ("0 0 0 * * *-3", None),
    ("* * * * *", None), ("* * * * * * *", None), ("60 * * * * *", None),
    ("* 60 * * * *", None), ("* * 24 * * *", None), ("* * * 0 * *", None),
    ("* * * 32 * *", None), ("* * * * 0 *", None), ("* * * * 13 *", None),
    ("* * * * * 7", None), ("*/0 * * * * *", None), ("5-1 * * * * *", None),
    ("1-2-3 * * * * *", None), ("1/2/3 * * * * *", None), ("-1 * * * * *", None),
    ("a * * * * *", None), ("1.5 * * * * *", None), ("0 0 0 * foo *", None),
    ("0 0 0 * * funday", None), ("0 0 0 L * *", None), ("0 0 0 15W * *", None),
    ("0 0 0 * * 1#2", None), (", * * * * *", None), ("0 0 0 30 2 *", None),
    ("0 0 0 31 4,6,9,11 *", None), ("0 0 0 29 2 *", None), ("0 0 0 30 2 1", None),
    ("0 0 0 30 2 ?", None), ("0 0 0 31 2 */2", None),
    # time zones
    ("0 0 9 * * *", "Europe/Paris"), ("0 0 9 * * *", "America/New_York"),
    ("0 0 9 * * *", "UTC"), ("0 0 9 * * *", "Etc/GMT+5"), ("0 0 9 * * *", "Mars/Olympus"),
    ("0 0 9 * * *", "europe/paris"), ("0 0 9 * * *", "Local"), ("0 0 9 * * *", ""),
    ("0 0 9 * * *", "EST"), ("@daily", "Asia/Tokyo"),
]  # fmt: skip

# Where the client refuses what the server takes, and why (docs/schedules.md says so).
CRON_STRICTER: dict[tuple[str, str | None], str] = {
    ("0 0 9 * * *", "Local"): "Go's name for the server's own zone, which may differ from one "
    "server of a cluster to the next: a schedule must mean the same time on every server",
}
# Where the client takes what the server refuses: none may be.


@pytest.mark.parametrize(("pattern", "zone"), CRON_CASES)
def test_schedule_patterns_and_zones_agree_with_the_server(schedule_stream, pattern, zone):
    """cron= and time_zone=: the client's verdict is the server's."""
    nc, name = schedule_stream
    subject, target = f"{name}.s", f"{name}.t"
    try:
        schedule_headers(subject, target, cron=pattern, time_zone=zone)
        client_takes = True
    except (ValueError, TypeError):
        client_takes = False
    raw = {"Nats-Schedule": pattern, "Nats-Schedule-Target": target}
    if zone is not None:
        raw["Nats-Schedule-Time-Zone"] = zone
    server_takes = _server_verdict(nc, subject, raw)
    _agree(client_takes, server_takes, CRON_STRICTER.get((pattern, zone)))


def _every_cases() -> list[Any]:
    return [1, 1.0, 1.5, 0.999, 0.5, 3600, 86400 * 365, 2.0001]


@pytest.mark.parametrize("every", _every_cases())
def test_every_agrees_with_the_server(schedule_stream, every):
    """every= (seconds): what the client sends is taken, what it refuses is refused."""
    nc, name = schedule_stream
    subject, target = f"{name}.s", f"{name}.t"
    try:
        headers, _ = schedule_headers(subject, target, every=every)
    except (ValueError, TypeError):
        spec = f"@every {int(every * 1e9)}ns"  # what was asked, to the nanosecond
        raw = {"Nats-Schedule": spec, "Nats-Schedule-Target": target}
        assert not _server_verdict(nc, subject, raw)
        return
    assert _server_verdict(nc, subject, {k: str(v) for k, v in headers.items()})


_UTC = UTC
# at=: zones and offsets, the past, the calendar's ends, sub-second times, and naive times.
AT_CASES = [
    datetime(2030, 1, 1, tzinfo=_UTC),
    datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2030, 1, 1, tzinfo=timezone(-timedelta(hours=8))),
    datetime(2030, 6, 1, 12, tzinfo=ZoneInfo("Europe/Paris")),
    datetime(2000, 1, 1, tzinfo=_UTC),  # in the past: the server fires it at once
    datetime(1, 1, 1, tzinfo=_UTC),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=_UTC),
    datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=_UTC),
    datetime(2030, 1, 1),  # naive
    datetime(2000, 1, 1, 0, 0, 0, 5),  # naive
]


# The server takes these but keeps the time as Go's UnixNano(), undefined outside int64
# nanoseconds (1678 to 2262): 9999 fires at once, year 1 never (test_schedules.py).
AT_STRICTER = {
    AT_CASES[5]: "outside the int64 nanoseconds the server keeps: it would never fire",
    AT_CASES[6]: "outside the int64 nanoseconds the server keeps: it fires at once",
}


@pytest.mark.parametrize("at", AT_CASES, ids=lambda at: at.isoformat())
def test_at_agrees_with_the_server(schedule_stream, at):
    """at= (a datetime): what the client sends is taken; what it refuses (a naive time) the
    server refuses too, sent as the same wall-clock time without an offset, except the
    times the server cannot keep (AT_STRICTER)."""
    nc, name = schedule_stream
    subject, target = f"{name}.s", f"{name}.t"
    try:
        headers, _ = schedule_headers(subject, target, at=at)
    except ValueError:
        text = at.isoformat().replace("+00:00", "Z")
        raw = {"Nats-Schedule": f"@at {text}", "Nats-Schedule-Target": target}
        _agree(False, _server_verdict(nc, subject, raw), AT_STRICTER.get(at))
        return
    assert _server_verdict(nc, subject, {k: str(v) for k, v in headers.items()})


# --------------------------------------------------------------------------- names

NAMES = [
    "ORDERS", "orders-2024_v1", "a", "x" * 255, "x" * 256, "é" * 127, "é" * 128,
    "a.b", "a*b", "a>b", "a/b", "a\\b", "a b", "a\tb", "a\x00b", "", "$SYS", "a=b",
    "a#b", "a@b", "a~b", "a,b", "a:b", "a|b", "ünïcødé", "a\u00a0b", "a\x7fb",
]  # fmt: skip

# Refused by the client, taken by the server, and why: none.
NAME_STRICTER: dict[str, str] = {}


def _api_verdict(nc: jetstream_sync.Client, subject: str, body: dict[str, Any]) -> bool:
    """Whether the server's JetStream API does what ``body`` asks on ``subject``."""
    if not is_publish_subject(subject):
        return False  # no server can be asked: the protocol cannot carry the subject
    try:
        reply = nc.request(subject, json.dumps(body).encode(), timeout=5)
    except (jetstream_sync.TimeoutError, jetstream_sync.NoRespondersError):
        return False  # a name of several tokens reaches no API endpoint
    return "error" not in json.loads(reply.data)


def _stream_verdict(nc: jetstream_sync.Client, name: str, subject: str) -> bool:
    """Whether the server creates a (memory) stream ``name`` on ``subject``; it is deleted again."""
    body = {"name": name, "subjects": [subject], "storage": "memory"}
    created = _api_verdict(nc, f"$JS.API.STREAM.CREATE.{name}", body)
    if created:
        nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=10)
    return created


def _client_verdict(check: Any, value: Any) -> bool:
    try:
        check(value)
    except (ValueError, TypeError):
        return False
    return True


@pytest.mark.parametrize("name", NAMES, ids=[repr(n)[:24] for n in NAMES])
def test_stream_names_agree_with_the_server(schedule_stream, name):
    """A stream name the client takes is one the server creates a stream with, and back."""
    nc, _ = schedule_stream
    server_takes = _stream_verdict(nc, name, f"{unique_stream_name('N')}.>")
    client_takes = _client_verdict(check_stream_name, name)
    _agree(client_takes, server_takes, NAME_STRICTER.get(name))


@pytest.mark.parametrize("name", NAMES, ids=[repr(n)[:24] for n in NAMES])
def test_consumer_names_agree_with_the_server(schedule_stream, name):
    """A consumer name the client takes is one the server creates a consumer with, and back."""
    nc, stream = schedule_stream
    body = {"stream_name": stream, "config": {"name": name, "durable_name": name,
            "ack_policy": "explicit"}}  # fmt: skip
    server_takes = _api_verdict(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body)
    if server_takes:
        nc.request(f"$JS.API.CONSUMER.DELETE.{stream}.{name}", b"", timeout=10)
    client_takes = _client_verdict(check_consumer_name, name)
    _agree(client_takes, server_takes, NAME_STRICTER.get(name))


# --------------------------------------------------------------------------- counters

INCREMENTS = [0, 1, -1, 42, -(10**18), 10**30, -(10**30), 2**63, True, 1.5, "5", None]


@pytest.fixture(scope="module")
def counter_stream(shared_server):
    """A stream with allow_msg_counter, on the suite's shared server."""
    with _module_stream(shared_server, "AGREECNT", allow_msg_counter=True) as (nc, _, name):
        yield nc, name


@pytest.mark.parametrize("delta", INCREMENTS, ids=[repr(d)[:24] for d in INCREMENTS])
def test_counter_increments_agree_with_the_server(counter_stream, delta):
    """Every increment the client takes is one the server applies; what it refuses
    (not an int) has no text the server could take as the same number."""
    nc, stream = counter_stream
    try:
        text = increment_header(delta)
    except TypeError:
        # 1.5, "5" (a str is not a number to add), None, True: the client sends nothing;
        # the server refuses 1.5 and takes "5" as text, which the client refuses by type.
        if isinstance(delta, float):
            assert not _server_verdict(nc, f"{stream}.c", {"Nats-Incr": repr(delta)}, b"")
        return
    assert _server_verdict(nc, f"{stream}.c", {"Nats-Incr": text}, b"")


# --------------------------------------------------------------------------- Key-Value

ADR8 = (
    "ADR-8: bucket names are [a-zA-Z0-9_-]+ and written keys [-/_=.a-zA-Z0-9]+ in every NATS "
    "client, so that every client can reach what one wrote (docs/key-value.md)"
)
BUCKETS = ["orders", "Orders_2-x", "a=b", "a.b", "a b", "a*b", "", "é", "a/b", "a@b"]
BUCKET_STRICTER = {"a=b": ADR8, "é": ADR8, "a@b": ADR8}


@pytest.mark.parametrize("bucket", BUCKETS, ids=[repr(b) for b in BUCKETS])
def test_bucket_names_agree_with_the_server_or_follow_adr_8(schedule_stream, bucket):
    """A bucket name the client takes makes a KV_ stream the server creates; the names it
    refuses beyond the server's are ADR-8's."""
    nc, _ = schedule_stream
    server_takes = _stream_verdict(nc, f"KV_{bucket}", f"$KV.{bucket}.>")
    client_takes = _client_verdict(check_bucket, bucket)
    _agree(client_takes, server_takes, BUCKET_STRICTER.get(bucket))


KEYS = ["a", "a.b.c", "a/b=c_d-e", "a@b", "x#y", "a b", "a..b", ".a", "a.", "a*", "a.>", "é"]
KEY_STRICTER = {"a@b": ADR8, "x#y": ADR8, "é": ADR8, "a*": ADR8}


@pytest.fixture(scope="module")
def bucket_stream(shared_server):
    """A bucket, for raw puts of keys."""
    with jetstream_sync.connect(shared_server.url) as nc:
        js = nc.jetstream(timeout=10)
        kv = js.create_key_value(bucket=unique_stream_name("agree"))
        yield nc, kv.bucket
        js.delete_key_value(kv.bucket)


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_written_keys_agree_with_the_server_or_follow_adr_8(bucket_stream, key):
    """A key put() takes is stored by the server; the keys it refuses beyond the server's are
    ADR-8's (they are still read, deleted and watched: docs/key-value.md)."""
    nc, bucket = bucket_stream
    subject = f"$KV.{bucket}.{key}"
    server_takes = is_publish_subject(subject) and _server_verdict(nc, subject, {})
    client_takes = _client_verdict(check_key, key)
    _agree(client_takes, server_takes, KEY_STRICTER.get(key))


# --------------------------------------------------------------------------- headers

GO_TEXTPROTO = (
    "a key outside RFC 7230's token characters, or a control byte in a value: other NATS "
    "clients (nats.go reads headers with Go's textproto) may refuse or misread the whole "
    "header block; a NUL also separates pairs in the C encoder"
)
ADR_4 = "ADR-4 allows printable ASCII only in a header name: nats.py drops such a key"

HEADERS = [
    ("X-Key", "v"), ("X-Key", ""), ("X-Key", "v v"), ("X-Key", "é"), ("é", "v"),
    ("K K", "v"), ("K\tK", "v"), ("K\x7f", "v"), ("X-Key", "v\x00w"), ("K:", "v"),
    ("", "v"), ("X-Key", "v\r\nY: w"),
]  # fmt: skip
HEADER_STRICTER = {
    ("K K", "v"): GO_TEXTPROTO, ("K\tK", "v"): GO_TEXTPROTO, ("K\x7f", "v"): GO_TEXTPROTO,
    ("X-Key", "v\x00w"): GO_TEXTPROTO, ("é", "v"): ADR_4,
}  # fmt: skip


def _raw_header_verdict(
    port: int, js: Any, stream: Any, subject: str, key: str, value: str
) -> bool:
    """Whether a raw HPUB with the line ``key: value`` is stored and reads back as that pair."""
    before = stream.info().state.last_seq
    block = b"NATS/1.0\r\n%s: %s\r\n\r\n" % (key.encode(), value.encode())
    raw = RawClient(port)
    try:
        raw.send(b"HPUB %s %d %d\r\n%s\r\n" % (subject.encode(), len(block), len(block), block))
    finally:
        raw.close()
    # The PONG says the server read the HPUB, not that the stream stored it yet: a marker
    # published after it is stored after it, so its PubAck says the raw one was decided.
    marker = js.publish(subject, b"marker", timeout=10).seq
    if marker == before + 1:
        return False
    return stream.get_msg(before + 1).headers.get(key) == value.strip(" \t")


@pytest.mark.parametrize(("key", "value"), HEADERS, ids=[repr(h)[:24] for h in HEADERS])
def test_headers_agree_with_the_server_or_say_why_not(shared_server, js, stream, key, value):
    """A header pair the client encodes is one the server stores and gives back as that pair;
    the pairs it refuses beyond that are listed with the reason."""
    server_takes = _raw_header_verdict(
        shared_server.port, js, stream, f"{stream.name}.h", key, value
    )
    client_takes = _client_verdict(lambda pair: encode_headers([pair]), (key, value))
    _agree(client_takes, server_takes, HEADER_STRICTER.get((key, value)))


# --------------------------------------------------------------------------- batches


@pytest.fixture(scope="module")
def atomic_stream(shared_server):
    """A stream with allow_atomic, on the suite's shared server."""
    with _module_stream(shared_server, "AGREEBATCH", allow_atomic=True) as handles:
        yield handles


def _raw_batch_verdict(nc: jetstream_sync.Client, subject: str, size: int) -> bool:
    """Whether the server commits an atomic batch of ``size`` messages sent raw."""
    batch_id = uuid.uuid4().hex
    for seq in range(1, size):
        headers = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)}
        nc.publish(subject, b"m", headers=headers)
    commit = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(size),
              "Nats-Batch-Commit": "1"}  # fmt: skip
    reply = nc.request(subject, b"m", timeout=30, headers=commit)
    return "error" not in json.loads(reply.data)


@pytest.mark.parametrize("size", [1, 999, 1000, 1001, 1500])
def test_atomic_batch_sizes_agree_with_the_server(atomic_stream, size):
    """publish_batch takes what the server commits (its default limit, 1,000) and no more."""
    nc, js, name = atomic_stream
    server_takes = _raw_batch_verdict(nc, f"{name}.raw", size)
    try:
        js.publish_batch([(f"{name}.b", b"m")] * size)
        client_takes = True
    except ValueError:
        client_takes = False
    _agree(client_takes, server_takes)


@pytest.fixture(scope="module")
def fast_batch_stream(shared_server):
    """A stream with allow_batched (fast batches), on the suite's shared server."""
    with _module_stream(shared_server, "AGREEFAST", allow_batched=True) as handles:
        yield handles


def _raw_flow_window(nc: jetstream_sync.Client, subject: str, flow: object) -> int:
    """The first window (``msgs``) the server grants a one-message fast batch whose reply
    subjects carry ``flow`` as sent (raw, unchecked); the batch is committed."""
    inbox = nc.new_inbox()
    with nc.subscribe(f"{inbox}.>") as sub:
        nc.publish(subject, b"m", reply=f"{inbox}.{flow}.ok.1.0.$FI")
        first = json.loads(sub.next_msg(timeout=10).data)
        nc.publish(subject, b"", reply=f"{inbox}.{flow}.ok.2.3.$FI")  # commit, no message
        while "batch" not in json.loads(sub.next_msg(timeout=10).data):
            pass  # flow acks, then the PubAck naming the batch
    assert first["type"] == "ack", first
    window: int = first["msgs"]
    return window


SERVER_MAX_FLOW = 500  # nats-server 2.14 and 2.15 never grant a larger window
FLOWS: list[object] = [1, 10, 500, 501, 65535, 0, -1, 65536, "x", 1.5, True]
FLOW_STRICTER = (
    "the server reads no error into a flow: one it cannot read as a count (0, -1, x, True) "
    "starts the batch at its smallest window, a larger one at its largest, and 1.5 (two "
    "words of the subject) at another, so a mistyped flow would go unnoticed"
)


@pytest.mark.parametrize("flow", FLOWS, ids=repr)
def test_fast_batch_flow_agrees_with_the_server(fast_batch_stream, flow):
    """fast_batch(flow=): a flow the client takes is granted as asked (up to the server's
    cap); what it refuses the server takes only by putting another window in its place."""
    nc, js, name = fast_batch_stream
    window = _raw_flow_window(nc, f"{name}.raw", flow)
    try:
        batch = js.fast_batch(flow=flow)  # type: ignore[arg-type]
    except ValueError:
        _agree(False, True, FLOW_STRICTER)
        assert window > 0, window  # a window of the server's choosing
        return
    with batch:
        batch.add(f"{name}.f", b"m")
        assert batch.commit().seq > 0
    assert window == min(flow, SERVER_MAX_FLOW)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- stream subjects

# (">" alone is left out: on a shared server it overlaps every other stream's subjects.)

STREAM_SUBJECTS = [
    "a", "a.b", "a.*", "a.>", "a.*.c", "*", "a.>.b", "a*", "a.b*", "a>", "a..b", ".a",
    "a.", "a b", "a\tb", "é.x", "a/b", "$KV.x.>", "a.\x7f", "a.*x",
]  # fmt: skip


@pytest.mark.parametrize("subject", STREAM_SUBJECTS, ids=[repr(s) for s in STREAM_SUBJECTS])
def test_stream_subjects_agree_with_the_server(schedule_stream, subject):
    """A stream's subjects: the client's config check takes what the server creates a stream
    with, and refuses the rest."""
    nc, _ = schedule_stream
    name = unique_stream_name("SUBJ")
    server_takes = _stream_verdict(nc, name, subject)
    client_takes = _client_verdict(
        lambda s: jetstream_sync.StreamConfig(name=name, subjects=[s]), subject
    )
    _agree(client_takes, server_takes)
