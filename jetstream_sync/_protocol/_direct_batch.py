"""Batched direct get, decoded a batch at a time: the pure-Python twin of
``jss_direct_batch_decode`` (``csrc/jss_direct_batch.c``) and what both share.

A batched direct get (ADR-31) answers with one reply per stored message,
its metadata in headers (``Nats-Subject``, ``Nats-Sequence``,
``Nats-Time-Stamp``...), then a ``204 EOB`` status reply. The caller lays
the replies' header blocks end to end and gets columns back: a kind, the
sequence and the time per block, and the subjects as one buffer with Arrow
string offsets. Nothing is made per message, so a bulk reader (the Spark
data source) can hand the columns to Arrow as they are. This twin mirrors
the C function check for check, so both raise the same errors.
"""

from __future__ import annotations

import re
from array import array
from datetime import date
from typing import NamedTuple

from jetstream_sync.errors import ProtocolError

from . import _py
from ._py.headers import _status_line

__all__ = [
    "DIRECT_BATCH_MSG",
    "DIRECT_BATCH_MSG_HEADERS",
    "TIME_UNITS",
    "DirectBatch",
    "decode_direct_batch",
]

#: The kind of a block that is a stored message; ...
DIRECT_BATCH_MSG = -1
#: ... of one that also carries headers of its own. Other kinds are status codes.
DIRECT_BATCH_MSG_HEADERS = -2
#: The ``unit_ns`` values times can be given in (ns, µs, ms, s).
TIME_UNITS = (1, 1000, 1_000_000, 1_000_000_000)

# Error codes, equal to the JSS_DIRECT_BATCH_ERR_* values of jss_proto.h.
ERR_MISSING = -40
ERR_SEQUENCE = -41
ERR_TIME = -42
ERR_UNIT = -43
ERR_SPACE = -44
ERROR_MESSAGES = {
    ERR_MISSING: "direct get reply without Nats-Subject, Nats-Sequence or Nats-Time-Stamp",
    ERR_SEQUENCE: "direct get reply whose Nats-Sequence is not an unsigned int64",
    ERR_TIME: "direct get reply whose Nats-Time-Stamp is not an RFC 3339 time in range",
    ERR_SPACE: "direct get subjects larger than their buffer",
}

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SUBJECT, _SEQUENCE, _TIME, _JETSTREAM = 1, 2, 3, 4
_KEYS = {
    b"Nats-Subject": _SUBJECT,
    b"Nats-Sequence": _SEQUENCE,
    b"Nats-Time-Stamp": _TIME,
    b"Nats-Stream": _JETSTREAM,
    b"Nats-Num-Pending": _JETSTREAM,
    b"Nats-Last-Sequence": _JETSTREAM,
    b"Nats-UpTo-Sequence": _JETSTREAM,
}
_RFC3339 = re.compile(
    rb"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    rb"(?:\.([0-9]{1,9}))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)


class DirectBatch(NamedTuple):
    """The columns of a batch of direct-get replies, one entry per reply.

    Attributes:
        kinds: int32 per reply: :data:`DIRECT_BATCH_MSG`,
            :data:`DIRECT_BATCH_MSG_HEADERS` (the message has headers of its
            own: decode that block in Python), or the reply's status code
            (``204`` end of batch, ``404`` nothing found, ``408`` bad request...).
        seqs: int64 per reply: the stream sequence (0 for a status).
        times: int64 per reply: the time stored, in the ``unit_ns`` asked
            for, since the epoch, rounded down (0 for a status).
        subject_offsets: int32, one more than replies: where each subject
            ends in ``subjects`` (Arrow string offsets; a status adds nothing).
        subjects: the subjects' bytes, end to end.
        messages: how many replies are messages (not statuses).
        own_headers: how many of those carry headers of their own.
    """

    kinds: memoryview
    seqs: memoryview
    times: memoryview
    subject_offsets: memoryview
    subjects: memoryview
    messages: int
    own_headers: int


def check_unit(unit_ns: int) -> None:
    """Reject a time unit that is not one of :data:`TIME_UNITS`.

    Raises:
        ValueError: ``unit_ns`` is not 1, 1000, 1000000 or 1000000000.
    """
    if unit_ns not in TIME_UNITS:
        raise ValueError(f"unit_ns must be one of {TIME_UNITS}, not {unit_ns!r}")


def batch_error(code: int, data: bytes, pos: int) -> ProtocolError:
    """The ProtocolError both implementations raise for an error code at ``pos``.

    Its excerpt stops at the end of the block holding ``pos`` (its first
    CRLFCRLF from there): the next block is another reply's.
    """
    end = _block_end(data, pos)
    if code in ERROR_MESSAGES:
        excerpt = data[pos : min(pos + 32, end)]
        return ProtocolError(f"{ERROR_MESSAGES[code]} at offset {pos}: {excerpt!r}")
    return _py.protocol_error(code, data, pos, end)


def _block_end(data: bytes, pos: int) -> int:
    """The index just past the block holding ``pos`` (the end of data if it has no end)."""
    stop = data.find(b"\r\n\r\n", pos)
    return len(data) if stop < 0 else stop + 4


def check_whole(decoded: int, consumed: int, size: int, count: int) -> None:
    """Raise unless exactly ``count`` blocks filled the ``size`` bytes.

    Raises:
        ProtocolError: more, fewer or partial blocks than replies.
    """
    if decoded != count or consumed != size:
        raise ProtocolError(
            f"{size} bytes of direct get header blocks do not hold exactly {count} blocks "
            f"({decoded} decoded from the first {consumed} bytes)"
        )


def decode_direct_batch(blocks: _py.BytesLike, count: int, unit_ns: int) -> DirectBatch:
    """Decode the header blocks of ``count`` direct-get replies laid end to end.

    Args:
        blocks: the replies' header blocks (each ``NATS/1.0`` up to its blank
            line), in reply order, concatenated.
        count: how many replies they belong to.
        unit_ns: the unit of :attr:`DirectBatch.times` in nanoseconds (1, 1000...).

    Returns:
        The columns (see :class:`DirectBatch`).

    Raises:
        ProtocolError: a block is not a valid header block, a message block
            lacks or garbles its metadata, or the blocks are not ``count``.
        ValueError: ``unit_ns`` is not one of :data:`TIME_UNITS`.
    """
    check_unit(unit_ns)
    data = bytes(blocks)
    kinds, seqs, times = array("i"), array("q"), array("q")
    offsets, subjects = array("i", [0]), bytearray()
    messages = own_headers = 0
    pos = 0
    while pos < len(data) and len(kinds) < count:
        if data[pos : pos + 8] != b"NATS/1.0":
            raise batch_error(_py.ERR_HDR_PREFIX, data, pos)
        end = data.find(b"\r\n\r\n", pos + 8)
        if end < 0:
            raise batch_error(_py.ERR_HDR_END, data, pos)
        status, found, own = _block(data, pos, end)
        if status is not None:
            kinds.append(status)
            seqs.append(0)
            times.append(0)
        else:
            if len(found) < 3:
                raise batch_error(ERR_MISSING, data, pos)
            seq = found[_SEQUENCE]
            if not seq.isdigit() or int(seq) > _INT64_MAX:
                raise batch_error(ERR_SEQUENCE, data, pos)
            stamp = _time(found[_TIME], unit_ns)
            if stamp is None:
                raise batch_error(ERR_TIME, data, pos)
            if len(subjects) + len(found[_SUBJECT]) > min(len(data), 2**31 - 1):
                raise batch_error(ERR_SPACE, data, pos)  # never: a subject is in data
            kinds.append(DIRECT_BATCH_MSG_HEADERS if own else DIRECT_BATCH_MSG)
            seqs.append(int(seq))
            times.append(stamp)
            subjects += found[_SUBJECT]
            messages += 1
            own_headers += own
        offsets.append(len(subjects))
        pos = end + 4
    check_whole(len(kinds), pos, len(data), count)
    return DirectBatch(
        memoryview(kinds),
        memoryview(seqs),
        memoryview(times),
        memoryview(offsets),
        memoryview(bytes(subjects)),
        messages,
        own_headers,
    )


def _block(data: bytes, pos: int, end: int) -> tuple[int | None, dict[int, bytes], bool]:
    """The status, the first value of each direct-get key and whether other keys are there."""
    status: int | None = None
    found: dict[int, bytes] = {}
    own = False
    line_pos = pos
    for index, line in enumerate(data[pos:end].split(b"\r\n")):
        if b"\r" in line or b"\n" in line:
            raise batch_error(_py.ERR_HDR_CRLF, data, line_pos)
        if index == 0:
            status = _status_line(line, data, line_pos, end + 4)[0]
        else:
            key, colon, value = line.partition(b":")
            if not colon:
                raise batch_error(_py.ERR_HDR_LINE, data, line_pos)
            if not key:
                raise batch_error(_py.ERR_HDR_KEY, data, line_pos)
            which = _KEYS.get(key)
            if which is None:
                own = True
            elif which != _JETSTREAM and which not in found:
                found[which] = value.strip(b" \t")
        line_pos += len(line) + 2
    return status, found, own


def _time(text: bytes, unit_ns: int) -> int | None:
    """An RFC 3339 time in ``unit_ns`` since the epoch (rounded down), or None."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    frac = int((m.group(7) or b"0").ljust(9, b"0"))
    sign = 0 if m.group(8) is None else (1 if m.group(8) == b"+" else -1)
    off_h, off_m = (0, 0) if sign == 0 else (int(m.group(9)), int(m.group(10)))
    try:
        days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None
    if hour > 23 or minute > 59 or second > 59 or off_h * 60 + off_m >= 1440:
        return None
    secs = days * 86400 + hour * 3600 + minute * 60 + second - sign * (off_h * 3600 + off_m * 60)
    per = 1_000_000_000 // unit_ns
    # the C bounds, its division truncating toward zero
    if secs > (_INT64_MAX - 1_000_000_000) // per or secs < -(-_INT64_MIN // per):
        return None
    return secs * per + frac // unit_ns
