"""Direct-get replies to Arrow record batches of the read schema (no server, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetstream_sync.errors import ProtocolError
from jetstream_sync.jetstream._arrow_decode import decode_replies, last_seq, read_schema

SCHEMA = read_schema()
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
    batch = decode_replies([reply(7), reply(8, "orders.us")], "ORDERS", 100)
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
    batch = decode_replies([reply(1), own, reply(3)], "ORDERS", 9)
    assert [row["headers"] for row in rows(batch)] == [
        None,
        [("K", ["x", "y"]), ("N", ["2"])],
        None,
    ]


def test_rows_after_the_end_are_left_out():
    """A batch that runs past the range's end is cut there."""
    replies = [reply(1), reply(2), reply(3)]
    assert [row["seq"] for row in rows(decode_replies(replies, "ORDERS", 2))] == [1, 2]


def test_empty_and_binary_payloads():
    """A message with no payload is an empty binary; any byte survives."""
    replies = [reply(1, data=b""), reply(2, data=bytes(range(256)))]
    got = [row["data"] for row in rows(decode_replies(replies, "S", 2))]
    assert got == [b"", bytes(range(256))]


def test_a_subject_that_is_not_utf8_shows_the_replacement_character():
    """Another client's bytes: the row is read, each invalid byte is U+FFFD."""
    bad = ("1", b"x", reply(2)[2].replace(b"orders.eu", b"orders.\xff\xe9"))
    got = rows(decode_replies([reply(1), bad], "S", 2))
    assert [row["subject"] for row in got] == ["orders.eu", "orders.\ufffd\ufffd"]


def test_header_bytes_that_are_not_utf8_show_the_replacement_character():
    """Header keys and values from another client are read too."""
    own = reply(1, extra=b"K\xe9: v\xff\r\nok: caf\xc3\xa9\r\n")
    assert rows(decode_replies([own], "S", 1))[0]["headers"] == [
        ("K\ufffd", ["v\ufffd"]),
        ("ok", ["caf\u00e9"]),
    ]


def test_a_garbled_reply_names_the_stream_and_the_sequence():
    """A decode error says which stream and which message."""
    bad = ("1", b"x", reply(3)[2].replace(b"Nats-Time-Stamp: ", b"Nats-Time-Stamp: x"))
    with pytest.raises(ProtocolError, match="stream 'ORDERS', sequence 3: .*Time-Stamp"):
        decode_replies([reply(1), reply(2), bad], "ORDERS", 5)
    no_seq = ("1", b"x", b"NATS/1.0\r\nNats-Subject: a\r\n\r\n")
    with pytest.raises(ProtocolError, match="stream 'ORDERS', the message after sequence 2"):
        decode_replies([reply(1), reply(2), no_seq], "ORDERS", 5)


def test_a_status_among_the_messages_is_a_protocol_error():
    """Statuses end a batch; the caller leaves them out."""
    status = ("1", b"", b"NATS/1.0 204 EOB\r\n\r\n")
    with pytest.raises(ProtocolError, match="status"):
        decode_replies([reply(1), status], "S", 2)
    with pytest.raises(ProtocolError, match="status"):
        last_seq(status, "S")


def test_a_reply_without_headers_is_a_protocol_error():
    """A plain MSG (no header block) is not a direct-get reply."""
    with pytest.raises(ProtocolError, match="header block"):
        decode_replies([reply(1), ("1", b"x", None)], "S", 2)


def test_last_seq():
    """The sequence of one message reply."""
    assert last_seq(reply(123456789), "S") == 123456789
