"""decode_direct_batch: the header blocks of a batched direct get as columns, in C and Python."""

from __future__ import annotations

import ast
from datetime import UTC, datetime

import pytest

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _c, _direct_batch
from jetstream_sync._timefmt import datetime_to_ns, parse_rfc3339
from jetstream_sync.errors import ProtocolError

IMPLS = [_c.decode_direct_batch, _direct_batch.decode_direct_batch]
MSG, OWN = _direct_batch.DIRECT_BATCH_MSG, _direct_batch.DIRECT_BATCH_MSG_HEADERS
STAMP = b"2026-11-22T20:24:51.123456789Z"
STAMP_NS = 1_795_379_091_123_456_789
EOB = b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 3\r\n\r\n"


def block(
    seq: int, subject: bytes = b"orders.eu", stamp: bytes = STAMP, extra: bytes = b""
) -> bytes:
    """A direct-get reply's header block as the server writes it."""
    return (
        b"NATS/1.0\r\nNats-Stream: ORDERS\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\n"
        b"Nats-Time-Stamp: %s\r\nNats-Num-Pending: 7\r\nNats-Last-Sequence: %d\r\n%s\r\n"
        % (subject, seq, stamp, seq - 1, extra)
    )


def columns(batch) -> tuple:
    """Every field of a DirectBatch as plain values."""
    return (
        batch.kinds.tolist(),
        batch.seqs.tolist(),
        batch.times.tolist(),
        batch.subject_offsets.tolist(),
        bytes(batch.subjects),
        batch.messages,
        batch.own_headers,
    )


@pytest.fixture(params=IMPLS, ids=["c", "python"])
def decode(request):
    """Each implementation in turn."""
    return request.param


def test_a_batch_becomes_columns(decode):
    """Sequences, times, subjects (Arrow offsets) and kinds come out per reply, status last."""
    data = block(5) + block(6, b"orders.us") + block(9, extra=b"Trace: a\r\nTrace: b\r\n") + EOB
    got = decode(data, 4, 1)
    assert columns(got) == (
        [MSG, MSG, OWN, 204],
        [5, 6, 9, 0],
        [STAMP_NS, STAMP_NS, STAMP_NS, 0],
        [0, 9, 18, 27, 27],
        b"orders.euorders.usorders.eu",
        3,
        1,
    )


def test_times_in_every_unit_round_down(decode):
    """The unit divides the nanoseconds, rounding toward the past (before 1970 too)."""
    data = block(1) + block(2, stamp=b"1969-12-31T23:59:59.9999995Z")
    for unit in (1, 1000, 1_000_000, 1_000_000_000):
        assert decode(data, 2, unit).times.tolist() == [STAMP_NS // unit, -500 // unit]


@pytest.mark.parametrize(
    "stamp",
    [
        b"2026-11-22T20:24:51Z",
        b"2026-11-22T20:24:51.1Z",
        b"2026-11-22t20:24:51.000000001z",
        b"2026-11-22 20:24:51.5+02:30",
        b"2026-11-22T20:24:51.123456789-11:59",
        b"2024-02-29T00:00:00Z",
        b"0001-01-01T00:00:00Z",
        b"9999-12-31T23:59:59.999999999Z",
    ],
)
def test_times_agree_with_parse_rfc3339(decode, stamp):
    """Every RFC 3339 form the client's own parser takes gives the same microseconds."""
    expected = datetime_to_ns(parse_rfc3339(stamp.decode())) // 1000
    assert decode(block(1, stamp=stamp), 1, 1000).times.tolist() == [expected]


@pytest.mark.parametrize(
    "stamp",
    [
        b"2026-02-29T00:00:00Z",  # not a leap year
        b"2026-13-01T00:00:00Z",
        b"2026-11-22T24:00:00Z",
        b"2026-11-22T20:60:00Z",
        b"2026-11-22T20:24:60Z",
        b"0000-01-01T00:00:00Z",
        b"2026-11-22T20:24:51.Z",
        b"2026-11-22T20:24:51.1234567890Z",
        b"2026-11-22T20:24:51+24:00",
        b"2026-11-22T20:24:51",
        b"2026-11-22T20:24:51Zx",
        b"2026-11-22 20:24:51.587861324 +0000 UTC",
    ],
)
def test_bad_times_are_refused(decode, stamp):
    """A time Python's datetime would refuse, or not RFC 3339, is a ProtocolError."""
    with pytest.raises(ProtocolError, match="Nats-Time-Stamp"):
        decode(block(1, stamp=stamp), 1, 1000)


def test_nanoseconds_out_of_int64_are_refused(decode):
    """Year 9999 fits microseconds but not nanoseconds since 1970."""
    data = block(1, stamp=b"9999-01-01T00:00:00Z")
    assert decode(data, 1, 1000).times.tolist() == [
        datetime_to_ns(datetime(9999, 1, 1, tzinfo=UTC)) // 1000
    ]
    with pytest.raises(ProtocolError, match="Nats-Time-Stamp"):
        decode(data, 1, 1)


@pytest.mark.parametrize("status", [b"404 Message Not Found", b"408 Bad Request", b"503"])
def test_a_status_alone(decode, status):
    """A lone status reply (nothing found, a bad request...) has that code as its kind."""
    got = decode(b"NATS/1.0 " + status + b"\r\n\r\n", 1, 1000)
    assert columns(got) == ([int(status[:3])], [0], [0], [0, 0], b"", 0, 0)


def test_the_direct_get_keys_are_not_headers_of_the_message(decode):
    """Nats-Stream, -Num-Pending, -Last-Sequence, -UpTo-Sequence say nothing of the message's
    own headers; any other key (Nats-Msg-Id, a lowercase twin) does."""
    plain = block(1, extra=b"Nats-UpTo-Sequence: 4\r\n")
    own = block(2, extra=b"Nats-Msg-Id: x\r\n") + block(3, extra=b"nats-sequence: 3\r\n")
    assert decode(plain + own, 3, 1000).kinds.tolist() == [MSG, OWN, OWN]


def test_the_first_of_a_repeated_key_counts(decode):
    """Two Nats-Sequence lines: the first one is the sequence."""
    data = block(4, extra=b"Nats-Sequence: 99\r\n")
    assert decode(data, 1, 1000).seqs.tolist() == [4]


def test_values_are_trimmed(decode):
    """Blanks around a value are not part of it."""
    data = (
        b"NATS/1.0\r\nNats-Subject:\t a.b \t\r\nNats-Sequence:7 \r\nNats-Time-Stamp:  %s\r\n\r\n"
        % (STAMP)
    )
    got = decode(data, 1, 1)
    assert (bytes(got.subjects), got.seqs.tolist(), got.times.tolist()) == (b"a.b", [7], [STAMP_NS])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"NATS/1.0\r\nNats-Sequence: 1\r\nNats-Time-Stamp: %s\r\n\r\n" % STAMP, "without Nats"),
        (block(1).replace(b"Sequence: 1", b"Sequence: -1"), "Nats-Sequence"),
        (block(1).replace(b"Sequence: 1", b"Sequence: 9223372036854775808"), "Nats-Sequence"),
        (block(1).replace(b"Sequence: 1", b"Sequence: "), "Nats-Sequence"),
        (b"NATS/2.0\r\n\r\n", "NATS/1.0"),
        (b"NATS/1.0 20x\r\n\r\n", "status"),
        (b"NATS/1.0\r\nNoColon\r\n\r\n", "':'"),
        (b"NATS/1.0\r\n: empty key\r\n\r\n", "empty key"),
        (b"NATS/1.0\r\nA: b\rc\r\n\r\n", "CR or LF"),
        (b"NATS/1.0\r\nNats-Subject: a\r\n", "blank line"),
    ],
)
def test_malformed_blocks_are_protocol_errors(decode, data, message):
    """A block that is not a direct-get reply fails the whole batch with a ProtocolError."""
    with pytest.raises(ProtocolError, match=message):
        decode(data, 1, 1000)


@pytest.mark.parametrize(
    "bad",
    [
        b"NATS/1.0 20x\r\n\r\n",
        b"NATS/2.0\r\n\r\n",
        b"NATS/1.0\r\nNo\r\n\r\n",
        b"NATS/1.0\r\nA: \n\r\n\r\n",
        b"NATS/1.0\r\nX: y\r\n\r\n",
    ],
)
def test_an_error_quotes_only_its_own_block(decode, bad):
    """The excerpt stays inside the block in error (its first line): the next block is
    another reply's."""
    data = block(1) + bad + block(2, b"secret.subject")
    with pytest.raises(ProtocolError) as caught:
        decode(data, 3, 1000)
    excerpt = ast.literal_eval(str(caught.value).split(" at offset ")[1].partition(": ")[2])
    assert excerpt and excerpt in bad and excerpt.endswith(b"\n"), str(caught.value)


@pytest.mark.parametrize("count", [1, 3])
def test_the_blocks_must_be_exactly_count(decode, count):
    """Fewer or more blocks than replies means they were not split where the replies were."""
    with pytest.raises(ProtocolError, match="do not hold exactly"):
        decode(block(1) + block(2), count, 1000)
    with pytest.raises(ProtocolError, match="do not hold exactly"):
        decode(block(1) + b"NATS/1.0", 1, 1000)


def test_nothing_is_nothing(decode):
    """No replies: empty columns."""
    assert columns(decode(b"", 0, 1000)) == ([], [], [], [0], b"", 0, 0)


@pytest.mark.parametrize("unit", [0, 10, -1000, 2_000_000_000])
def test_a_unit_that_does_not_divide_a_second_is_a_value_error(decode, unit):
    """Only ns, µs, ms and s."""
    with pytest.raises(ValueError, match="unit_ns"):
        decode(block(1), 1, unit)


def test_the_error_messages_are_the_same_in_c_and_python():
    """Both implementations raise the same message for the same bad batch."""
    data = block(1) + block(2, stamp=b"2026-11-22T20:24:51+24:00")
    messages = []
    for decode in IMPLS:
        with pytest.raises(ProtocolError) as err:
            decode(data, 2, 1000)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert f"offset {len(block(1))}:" in messages[0]


class TestDirectBatch:
    """jss_direct_batch_decode called directly."""

    C_FILE = "jss_direct_batch.c"

    def test_jss_direct_batch_decode_writes_nothing_past_the_blocks_it_decoded(self):
        """max_blocks bounds every output array; the state says what was consumed."""
        data = block(1) + block(2) + EOB
        guard = -777
        kinds = ffi.new("int32_t[4]", [guard] * 4)
        seqs = ffi.new("int64_t[4]", [guard] * 4)
        times = ffi.new("int64_t[4]", [guard] * 4)
        offsets = ffi.new("int32_t[4]", [guard] * 4)
        subjects = ffi.new(f"char[{len(data)}]")
        state = ffi.new("int64_t[]", lib.JSS_DIRECT_BATCH_STATE_FIELDS)
        exact = ffi.new(f"char[{len(data)}]")
        ffi.memmove(exact, data, len(data))
        n = lib.jss_direct_batch_decode(
            exact, len(data), 2, 1000, kinds, seqs, times, offsets, subjects, len(data), state
        )
        assert n == 2
        assert list(kinds) == [MSG, MSG, guard, guard]
        assert list(seqs)[2:] == list(times)[2:] == [guard, guard]
        assert list(offsets) == [0, 9, 18, guard]
        assert list(state) == [len(block(1) + block(2)), 0, 2, 0]

    def test_jss_direct_batch_decode_reports_where_a_block_went_wrong(self):
        """state[1] is the offset of the line in error."""
        data = block(1) + b"NATS/1.0\r\nBad line\r\n\r\n"
        kinds = ffi.new("int32_t[2]")
        seqs, times = ffi.new("int64_t[2]"), ffi.new("int64_t[2]")
        offsets = ffi.new("int32_t[3]")
        subjects = ffi.new(f"char[{len(data)}]")
        state = ffi.new("int64_t[]", lib.JSS_DIRECT_BATCH_STATE_FIELDS)
        n = lib.jss_direct_batch_decode(
            data, len(data), 2, 1, kinds, seqs, times, offsets, subjects, len(data), state
        )
        assert n == lib.JSS_ERR_HDR_LINE
        assert state[1] == len(block(1)) + len(b"NATS/1.0\r\n")

    def test_jss_direct_batch_decode_refuses_subjects_that_do_not_fit(self):
        """subjects_cap is honoured."""
        data = block(1)
        kinds = ffi.new("int32_t[1]")
        seqs, times = ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
        offsets = ffi.new("int32_t[2]")
        subjects = ffi.new("char[8]")
        state = ffi.new("int64_t[]", lib.JSS_DIRECT_BATCH_STATE_FIELDS)
        n = lib.jss_direct_batch_decode(
            data, len(data), 1, 1, kinds, seqs, times, offsets, subjects, 8, state
        )
        assert n == lib.JSS_DIRECT_BATCH_ERR_SPACE


def test_the_constants_match_the_python_twin():
    """Kinds and error codes in the header equal the Python module's."""
    assert (lib.JSS_DIRECT_BATCH_MSG, lib.JSS_DIRECT_BATCH_MSG_HEADERS) == (MSG, OWN)
    assert lib.JSS_DIRECT_BATCH_ERR_MISSING == _direct_batch.ERR_MISSING
    assert lib.JSS_DIRECT_BATCH_ERR_SEQUENCE == _direct_batch.ERR_SEQUENCE
    assert lib.JSS_DIRECT_BATCH_ERR_TIME == _direct_batch.ERR_TIME
    assert lib.JSS_DIRECT_BATCH_ERR_UNIT == _direct_batch.ERR_UNIT
    assert lib.JSS_DIRECT_BATCH_ERR_SPACE == _direct_batch.ERR_SPACE
