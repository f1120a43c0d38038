"""A batch of JetStream messages from Arrow columns as HPUB frames, for the Spark sink
(mirrors ``csrc/jss_batch.c``; the message ids' BLAKE2b, ``csrc/jss_blake2b.c`` in C,
is :func:`hashlib.blake2b` here)."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from .encode import _BAD_KEY_BYTE
from .proto import BytesLike
from .subjects import valid_subject

__all__ = [
    "BATCH_ERR_LINE",
    "BATCH_ERR_MSG_ID",
    "BATCH_ERR_NO_SUBJECT",
    "BATCH_ERR_NULL_DATA",
    "BATCH_ERR_SUBJECT",
    "BATCH_ERR_TOO_BIG",
    "BATCH_ERRORS",
    "ENC_ERR_KEY",
    "ENC_ERR_KV",
    "ENC_ERR_VALUE",
    "BatchColumn",
    "encode_batch_hpub",
]


# encode_batch_hpub's error codes (besides ENC_ERR_KEY / ENC_ERR_VALUE / ENC_ERR_KV for
# a row's headers).
ENC_ERR_KEY = -1
ENC_ERR_VALUE = -2
ENC_ERR_KV = -3
BATCH_ERR_NULL_DATA = -21
BATCH_ERR_NO_SUBJECT = -22
BATCH_ERR_SUBJECT = -23
BATCH_ERR_MSG_ID = -24
BATCH_ERR_TOO_BIG = -25
BATCH_ERR_LINE = -26
BATCH_ERRORS = {
    ENC_ERR_KEY: "a header key is empty or holds a byte below 0x21, ':' or 0x7f",
    ENC_ERR_VALUE: "a header value holds CR or LF",
    ENC_ERR_KV: "the header pairs are not key NUL value NUL ...",
    BATCH_ERR_NULL_DATA: "null data",
    BATCH_ERR_NO_SUBJECT: "no subject (null or empty, and no default subject)",
    BATCH_ERR_SUBJECT: "not a subject to publish to",
    BATCH_ERR_MSG_ID: "the msg id holds CR or LF",
    BATCH_ERR_TOO_BIG: "headers and payload are larger than the server's max_payload",
    BATCH_ERR_LINE: "the subject is too long for the server's max_control_line",
}
"""What each error code of :func:`encode_batch_hpub` means."""


class BatchColumn(NamedTuple):
    """A binary or string column in Arrow's layout with 64-bit offsets.

    Row ``r`` holds ``data[offsets[first + r]:offsets[first + r + 1]]``;
    with ``valid`` (a bitmap, least significant bit first), bit
    ``first + r`` is 0 for a null row.

    Attributes:
        data: the values' bytes (None when every value is empty).
        offsets: the int64 offsets, in native byte order.
        valid: the validity bitmap, or None when no row is null.
        first: Arrow's array offset.
    """

    data: BytesLike | None
    offsets: BytesLike
    valid: BytesLike | None
    first: int


def _row(col: BatchColumn | None, offsets: memoryview | None, r: int) -> bytes | None:
    """Row ``r`` of ``col`` (``offsets`` is its int64 view), or None when null or no column."""
    if col is None or offsets is None:
        return None
    i = col.first + r
    if col.valid is not None and not (memoryview(col.valid)[i >> 3] >> (i & 7)) & 1:
        return None
    start, stop = offsets[i], offsets[i + 1]
    return bytes(memoryview(col.data)[start:stop]) if col.data is not None else b""


def _kv_lines(kv: bytes) -> bytes | int:
    """The header lines of ``kv`` (key NUL value NUL ...), or its ENC_ERR_* code."""
    lines = []
    i = 0
    while i < len(kv):
        key_end = kv.find(b"\0", i)
        if key_end < 0:
            return ENC_ERR_KV
        key = kv[i:key_end]
        if not key or _BAD_KEY_BYTE.search(key):
            return ENC_ERR_KEY
        value_end = kv.find(b"\0", key_end + 1)
        if value_end < 0:
            return ENC_ERR_KV
        value = kv[key_end + 1 : value_end]
        if b"\r" in value or b"\n" in value:
            return ENC_ERR_VALUE
        lines.append(b"%s: %s\r\n" % (key, value))
        i = value_end + 1
    return b"".join(lines)


def _int64s(col: BatchColumn | None) -> memoryview | None:
    return None if col is None else memoryview(col.offsets).cast("B").cast("q")


def encode_batch_hpub(
    payloads: BatchColumn,
    subjects: BatchColumn | None,
    msg_ids: BatchColumn | None,
    headers: BatchColumn | None,
    *,
    start: int,
    end: int,
    default_subject: bytes,
    id_prefix: bytes | None,
    first_index: int,
    reply_prefix: bytes,
    first_token: int,
    max_payload: int,
    line_room: int,
    reply_suffix: bytes = b"",
) -> tuple[bytes, int, int]:
    """Encode rows ``start..end-1`` of a batch as JetStream HPUB frames, in one call.

    Row ``r`` becomes ``HPUB <subject> <reply_prefix><token><reply_suffix> <hdr> <total>``
    with token ``first_token + r - start``, its header pairs (``headers``:
    ``key NUL value NUL ...`` per row) and ``Nats-Msg-Id``: the row's
    ``msg_ids`` value, or when that is null (or there is no such column)
    ``id_prefix + str(first_index + r - start) + ":"`` and the 12 hex digits
    of ``blake2b(payload, digest_size=6, key=subject[:64])``. With
    ``id_prefix`` None a row without an id gets none, and a row with neither
    id nor headers becomes a plain ``PUB`` frame. A null or empty subject
    takes ``default_subject``.

    Args:
        payloads: the message bodies (a null row is an error).
        subjects: the subjects, or None for ``default_subject`` everywhere.
        msg_ids: explicit message ids, or None to derive them all.
        headers: each row's header pairs, or None.
        start: the first row to encode.
        end: one past the last row to encode.
        default_subject: the subject of rows without one (``b""``: none).
        id_prefix: what derived ids start with, or None to derive none.
        first_index: the index in derived ids of row ``start``.
        reply_prefix: what every reply subject starts with.
        first_token: the reply token of row ``start``.
        max_payload: the most bytes of header block and payload per message.
        line_room: the most bytes of subject and reply subject together (what
            the server's ``max_control_line`` leaves them).
        reply_suffix: what every reply subject ends with after its token (a
            fast-ingest batch's ``.<op>.$FI``).

    Returns:
        ``(frames, bad_row, code)``: ``code`` 0 and ``bad_row`` -1 when every
        row was encoded; else an error code (a key of :data:`BATCH_ERRORS`),
        the row in error and, in ``frames``, the rows before it.
    """
    out = bytearray()
    pay_off, subj_off, id_off, hdr_off = map(_int64s, (payloads, subjects, msg_ids, headers))
    for r in range(start, end):
        payload = _row(payloads, pay_off, r)
        if payload is None:
            return bytes(out), r, BATCH_ERR_NULL_DATA
        subject = _row(subjects, subj_off, r) or default_subject
        if not subject:
            return bytes(out), r, BATCH_ERR_NO_SUBJECT
        if not valid_subject(subject, False):
            return bytes(out), r, BATCH_ERR_SUBJECT
        token = b"%d" % (first_token + r - start)
        if len(subject) + len(reply_prefix) + len(token) + len(reply_suffix) > line_room:
            return bytes(out), r, BATCH_ERR_LINE
        kv = _row(headers, hdr_off, r)
        lines = _kv_lines(kv) if kv is not None else b""
        if isinstance(lines, int):
            return bytes(out), r, lines
        msg_id = _row(msg_ids, id_off, r)
        if msg_id is None and id_prefix is not None:
            digest = hashlib.blake2b(payload, digest_size=6, key=subject[:64]).hexdigest()
            msg_id = b"%s%d:%s" % (id_prefix, first_index + r - start, digest.encode())
        elif msg_id is not None and (b"\r" in msg_id or b"\n" in msg_id):
            return bytes(out), r, BATCH_ERR_MSG_ID
        if msg_id is not None:
            block = b"NATS/1.0\r\n%sNats-Msg-Id: %s\r\n\r\n" % (lines, msg_id)
        elif kv is not None:
            block = b"NATS/1.0\r\n%s\r\n" % lines
        else:
            block = b""  # neither headers nor an id: a PUB frame
        if len(block) + len(payload) > max_payload:
            return bytes(out), r, BATCH_ERR_TOO_BIG
        if block:
            out += b"HPUB %s %s%s%s %d %d\r\n%s%s\r\n" % (
                subject, reply_prefix, token, reply_suffix,
                len(block), len(block) + len(payload), block, payload,
            )  # fmt: skip
        else:
            out += b"PUB %s %s%s%s %d\r\n%s\r\n" % (
                subject, reply_prefix, token, reply_suffix, len(payload), payload,
            )  # fmt: skip
    return bytes(out), -1, 0
