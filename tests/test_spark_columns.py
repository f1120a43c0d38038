"""Direct-get replies to Arrow: the read schema's columns, filtered by the range (no Spark run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from jetstream_sync.errors import ProtocolError
from jetstream_sync.spark._columns import decode, last_seq
from jetstream_sync.spark._common import READ_SCHEMA
from jetstream_sync.spark._fetch import ReadRange

pytestmark = pytest.mark.spark

SCHEMA = to_arrow_schema(READ_SCHEMA, timezone="UTC")
T0 = datetime(2026, 11, 22, 20, 24, 51, 123456, tzinfo=UTC)


def reply(seq: int, subject: str = "orders.eu", extra: bytes = b"", data: bytes | None = None):
    """A direct-get message reply as the client's reply route hands it over."""
    when = T0 + timedelta(seconds=seq)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%f").encode() + b"789Z"
    block = (
        b"NATS/1.0\r\nNats-Stream: ORDERS\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\n"
        b"Nats-Time-Stamp: %s\r\n%s\r\n" % (subject.encode(), seq, stamp, extra)
    )
    return ("1", b"m%d" % seq if data is None else data, block)


def rows(batch) -> list[dict]:
    """The batch as Python rows."""
    return batch.to_pylist()


def test_every_column_of_the_read_schema():
    """stream, subject, seq, timestamp (µs, UTC), data and headers (null without own headers)."""
    batch = decode([reply(7), reply(8, "orders.us")], ReadRange("ORDERS", 1, 100), SCHEMA)
    assert batch.schema == SCHEMA
    assert rows(batch) == [
        {
            "stream": "ORDERS",
            "subject": "orders.eu",
            "seq": 7,
            "timestamp": T0 + timedelta(seconds=7),
            "data": b"m7",
            "headers": None,
        },
        {
            "stream": "ORDERS",
            "subject": "orders.us",
            "seq": 8,
            "timestamp": T0 + timedelta(seconds=8),
            "data": b"m8",
            "headers": None,
        },
    ]


def test_headers_of_the_message_own_become_a_map_of_lists():
    """Repeated keys keep every value in order; the direct-get keys are left out."""
    own = reply(2, extra=b"K: x\r\nN: 2\r\nK: y\r\nNats-Num-Pending: 5\r\n")
    batch = decode([reply(1), own, reply(3)], ReadRange("ORDERS", 1, 9), SCHEMA)
    assert [row["headers"] for row in rows(batch)] == [
        None,
        [("K", ["x", "y"]), ("N", ["2"])],
        None,
    ]


def test_the_range_filters_rows():
    """Rows past the end, before the start time or off the prefixes are dropped."""
    replies = [reply(1, "a.x"), reply(2, "a.y"), reply(3, "b.x"), reply(4, "a.x"), reply(5, "a.x")]
    rng = ReadRange(
        "ORDERS", 1, 4, prefixes=("a.",), min_time=T0 + timedelta(seconds=2, microseconds=1)
    )
    assert [row["seq"] for row in rows(decode(replies, rng, SCHEMA))] == [4]
    rng = ReadRange("ORDERS", 1, 4, min_time=T0 + timedelta(seconds=2))
    assert [row["seq"] for row in rows(decode(replies, rng, SCHEMA))] == [2, 3, 4]


def test_empty_and_binary_payloads():
    """A message with no payload is an empty binary; any byte survives."""
    replies = [reply(1, data=b""), reply(2, data=bytes(range(256)))]
    got = [row["data"] for row in rows(decode(replies, ReadRange("S", 1, 2), SCHEMA))]
    assert got == [b"", bytes(range(256))]


def test_a_subject_that_is_not_utf8_fails_here():
    """Arrow strings must be UTF-8: the batch is refused before Spark sees it."""
    bad = ("1", b"x", reply(1)[2].replace(b"orders.eu", b"orders.\xff"))
    with pytest.raises(pa.ArrowInvalid):
        decode([bad], ReadRange("S", 1, 2), SCHEMA)


def test_a_status_among_the_messages_is_a_protocol_error():
    """Statuses end a batch; the caller leaves them out."""
    status = ("1", b"", b"NATS/1.0 204 EOB\r\n\r\n")
    with pytest.raises(ProtocolError, match="status"):
        decode([reply(1), status], ReadRange("S", 1, 2), SCHEMA)
    with pytest.raises(ProtocolError, match="status"):
        last_seq(status)


def test_a_reply_without_headers_is_a_protocol_error():
    """A plain MSG (no header block) is not a direct-get reply."""
    with pytest.raises(ProtocolError, match="header block"):
        decode([reply(1), ("1", b"x", None)], ReadRange("S", 1, 2), SCHEMA)


def test_last_seq():
    """The sequence of one message reply."""
    assert last_seq(reply(123456789)) == 123456789
