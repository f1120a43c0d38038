"""Pure-Python twin of the C protocol core (``csrc/``, one file per job).

Same interface and same results as :mod:`jetstream_sync._protocol._c`,
including the same exceptions; it mirrors the C code check for check, so keep
both in step (a regex fast path takes well-formed MSG/HMSG lines and leaves
anything unusual to the mirrored path). ``encode_pub`` and ``encode_hpub`` are
plain Python in both implementations (a cffi call cannot beat
``%``-formatting), so ``_c`` imports them from here; ``_c`` encodes header
blocks in C and falls back on these functions for every error.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import select
import socket
import threading
from collections.abc import Iterable
from typing import NamedTuple, NoReturn, Protocol, TypeAlias, cast

from jetstream_sync.errors import BadHeaderError, ProtocolError

__all__ = [
    "BATCH_ERRORS",
    "IMPL",
    "MAX_CONTROL_LINE",
    "MAX_PAYLOAD",
    "OP_ERR",
    "OP_FIELDS",
    "OP_HMSG",
    "OP_INFO",
    "OP_MSG",
    "OP_OK",
    "OP_PING",
    "OP_PONG",
    "ACK_NEW",
    "ACK_OTHER",
    "ACK_SAME",
    "AckBatch",
    "BatchColumn",
    "encode_batch_hpub",
    "encode_headers",
    "encode_hpub",
    "encode_hpub_pairs",
    "encode_pub",
    "parse",
    "parse_direct_meta",
    "parse_headers",
    "last_round_trip",
    "parse_puback",
    "puback_batch",
    "round_trip",
    "valid_subject",
]

IMPL = "python"

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the parser and encoders accept as bytes."""


class Sliceable(Protocol):
    """Bytes that can be sliced (bytes-like objects and cffi buffers)."""

    def __getitem__(self, span: slice, /) -> BytesLike: ...


OP_MSG = 1
OP_HMSG = 2
OP_PING = 3
OP_PONG = 4
OP_OK = 5
OP_ERR = 6
OP_INFO = 7
OP_FIELDS = 10

MAX_PAYLOAD = 64 * 1024 * 1024
MAX_CONTROL_LINE = 1024 * 1024
MIN_HEADER_BLOCK = len(b"NATS/1.0\r\n\r\n")
_INT64_MAX = 2**63 - 1

# Error codes, equal to the JSS_ERR_* values of jss_proto.h.
ERR_RANGE = -1
ERR_OP = -2
ERR_LINE_TOO_LONG = -3
ERR_BARE_LF = -4
ERR_STRAY_CR = -5
ERR_ARGS = -6
ERR_NUMBER = -7
ERR_SIZE = -8
ERR_HDR_SIZE = -9
ERR_PAYLOAD_END = -10
ERR_HDR_BLOCK = -11
ERR_HDR_PREFIX = -12
ERR_HDR_END = -13
ERR_HDR_STATUS = -14
ERR_HDR_LINE = -15
ERR_HDR_KEY = -16
ERR_HDR_CRLF = -17

ERROR_MESSAGES = {
    ERR_RANGE: "start is after end",
    ERR_OP: "unknown protocol operation",
    ERR_LINE_TOO_LONG: f"control line longer than {MAX_CONTROL_LINE} bytes",
    ERR_BARE_LF: "control line ends with LF without CR",
    ERR_STRAY_CR: "CR inside a control line",
    ERR_ARGS: "wrong arguments for the operation",
    ERR_NUMBER: "sid or size is not an unsigned 64-bit decimal",
    ERR_SIZE: f"payload larger than {MAX_PAYLOAD} bytes",
    ERR_HDR_SIZE: f"header size larger than total size or smaller than {MIN_HEADER_BLOCK}",
    ERR_PAYLOAD_END: "payload not followed by CRLF",
    ERR_HDR_BLOCK: "HMSG header block not framed by NATS/1.0 and a blank line",
    ERR_HDR_PREFIX: "header block does not start with a NATS/1.0 line",
    ERR_HDR_END: "header block does not end with a blank line",
    ERR_HDR_STATUS: "header status is not a 3-digit code",
    ERR_HDR_LINE: "header line without ':'",
    ERR_HDR_KEY: "header line with an empty key",
    ERR_HDR_CRLF: "CR or LF inside a header line",
}


def protocol_error(code: int, data: Sliceable, pos: int, end: int) -> ProtocolError:
    """Build the ProtocolError both implementations raise for an error code.

    Args:
        code: one of the ``ERR_*`` codes.
        data: the bytes being parsed (a short excerpt goes into the message).
        pos: the offset of the op or header line in error.
        end: the index just past the bytes received for it. A reused read
            buffer holds older bytes beyond it (an earlier message's payload),
            which the message must never quote.

    Returns:
        The exception, with the reason, the offset (also its ``offset``) and up
        to 32 bytes of ``data[pos:end]``, cut after the first line end: the
        control line (or header line) in error, never the payload after it,
        which is a message's content.
    """
    excerpt = bytes(data[pos : min(pos + 32, end)])
    line_end = excerpt.find(b"\n")
    if line_end >= 0:
        excerpt = excerpt[: line_end + 1]
    error = ProtocolError(f"{ERROR_MESSAGES[code]} at offset {pos}: {excerpt!r}")
    error.offset = pos
    return error


def check_range(size: int, start: int, end: int) -> None:
    """Reject a ``[start, end)`` window that does not fit a buffer of ``size`` bytes.

    Args:
        size: the buffer's length in bytes.
        start: first index of the window.
        end: index just past the window.

    Raises:
        ValueError: unless ``0 <= start <= end <= size``.
    """
    if not 0 <= start <= end <= size:
        raise ValueError(f"bad window [{start}, {end}) of a {size}-byte buffer")


# ---------------------------------------------------------------------------
# parse

_NAME_BY_FIRST = {
    b"m": (OP_MSG, b"msg"),
    b"h": (OP_HMSG, b"hmsg"),
    b"+": (OP_OK, b"+ok"),
    b"-": (OP_ERR, b"-err"),
    b"i": (OP_INFO, b"info"),
}
_NAME_BY_SECOND = {b"i": (OP_PING, b"ping"), b"o": (OP_PONG, b"pong")}
_NAME_END = frozenset(b" \t\r")
_TOKEN = re.compile(rb"[^ \t]+")


class _NeedMore(Exception):
    """Internal: the op at the position is incomplete (``need`` as in ``parse``)."""

    def __init__(self, need: int = 0) -> None:
        super().__init__(need)
        self.need = need


class _Fail(Exception):
    """Internal: an error code, turned into a ProtocolError by ``parse``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def parse(buf: BytesLike, start: int, end: int) -> tuple[list[int], int, int]:
    """Parse every complete op in ``buf[start:end]``.

    Args:
        buf: bytes, bytearray or memoryview holding the received bytes.
        start: index of the first unparsed byte.
        end: index just past the last received byte.

    Returns:
        ``(ops, consumed, need)``: ``OP_FIELDS`` ints per op
        (``kind, a_off, a_len, sid, r_off, r_len, h_off, h_len, p_off, p_len``,
        offsets absolute into ``buf``); the index just past the last whole op;
        and, when the next op's control line is complete but its payload is
        not, the number of bytes from ``consumed`` that op occupies (else 0).

    Raises:
        ProtocolError: the bytes can never become valid protocol.
        ValueError: the window does not fit the buffer.
    """
    data = buf if isinstance(buf, bytes | bytearray) else bytes(memoryview(buf))
    check_range(len(data), start, end)
    ops: list[int] = []
    pos = start
    need = 0
    while pos < end:
        try:
            fields, pos = _parse_one(data, pos, end)
        except _NeedMore as more:
            need = more.need
            break
        except _Fail as fail:
            raise protocol_error(fail.code, data, pos, end) from None
        ops += fields
    return ops, pos, need


def _match_op(data: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    """Return ``(kind, name_len)`` of the op name at ``pos`` (see match_op in C)."""
    head = bytes(data[pos : min(end, pos + 5)]).lower()
    if head[:1] == b"p":
        if len(head) < 2:
            raise _NeedMore
        kind_name = _NAME_BY_SECOND.get(head[1:2])
    else:
        kind_name = _NAME_BY_FIRST.get(head[:1])
    if kind_name is None:
        raise _Fail(ERR_OP)
    kind, name = kind_name
    n = len(name)
    k = min(len(head), n)
    if head[:k] != name[:k]:
        raise _Fail(ERR_OP)
    if len(head) <= n:
        raise _NeedMore
    if head[n] not in _NAME_END:
        raise _Fail(ERR_OP)
    return kind, n


def _parse_one(data: bytes | bytearray, pos: int, end: int) -> tuple[list[int], int]:
    """Parse the op at ``pos``; return its fields and the index just past it."""
    fast = _FAST_LINES.get(data[pos])
    if fast is not None:
        match = fast.match(data, pos, end)
        if match is not None and match.end() - pos <= MAX_CONTROL_LINE + 1:
            fields = _fast_msg(data, pos, end, match)
            if fields is not None:
                return fields
    kind, name_len = _match_op(data, pos, end)
    avail = end - pos
    limit = pos + MAX_CONTROL_LINE + 1 if avail > MAX_CONTROL_LINE else end
    start = pos + name_len
    lf = data.find(b"\n", start, limit)
    if lf < 0:
        if avail > MAX_CONTROL_LINE:
            raise _Fail(ERR_LINE_TOO_LONG)
        raise _NeedMore
    if data[lf - 1] != 0x0D:
        raise _Fail(ERR_BARE_LF)
    stop = lf - 1
    if data.find(b"\r", start, stop) >= 0:
        raise _Fail(ERR_STRAY_CR)
    if kind == OP_MSG or kind == OP_HMSG:
        return _parse_msg(data, pos, start, stop, end, kind)
    return _simple_op(data, start, stop, kind), lf + 1


# Fast path: a complete, well-formed MSG/HMSG control line whose numbers cannot
# overflow. Anything it does not match goes through the general path, which
# decides (and reports errors) exactly like the C code.
_ARG = rb"[ \t]+([^ \t\r\n]+)"
_SID = rb"[ \t]+([0-9]{1,18})"
_SIZE = rb"[ \t]+([0-9]{1,8})"
_MSG_LINE = re.compile(rb"(?i:msg)" + _ARG + _SID + b"(?:" + _ARG + b")?" + _SIZE + rb"[ \t]*\r\n")
_HMSG_LINE = re.compile(
    rb"(?i:hmsg)" + _ARG + _SID + b"(?:" + _ARG + b")?" + _SIZE + _SIZE + rb"[ \t]*\r\n"
)
_FAST_LINES = {ord("M"): _MSG_LINE, ord("m"): _MSG_LINE, ord("H"): _HMSG_LINE, ord("h"): _HMSG_LINE}


def _fast_msg(
    data: bytes | bytearray, pos: int, end: int, match: re.Match[bytes]
) -> tuple[list[int], int] | None:
    """Fields of the MSG/HMSG whose control line ``match`` matched, or None to use the
    general path (sizes it would refuse)."""
    headers = match.re is _HMSG_LINE
    total = int(match[5] if headers else match[4])
    hdr = int(match[4]) if headers else 0
    if total > MAX_PAYLOAD or (headers and (hdr > total or hdr < MIN_HEADER_BLOCK)):
        return None
    a_off, a_stop = match.span(1)
    r_off, r_stop = match.span(3) if match.start(3) >= 0 else (0, 0)
    head = [OP_HMSG if headers else OP_MSG, a_off, a_stop - a_off, int(match[2]), r_off]
    head.append(r_stop - r_off)
    body, after = _body(data, pos, match.end(), end, headers, hdr, total)
    return head + body, after


def _simple_op(data: bytes | bytearray, start: int, stop: int, kind: int) -> list[int]:
    """Fields of PING, PONG, +OK, -ERR or INFO with arguments in ``data[start:stop]``."""
    if kind == OP_ERR:
        a_off, a_len = _trim(data, start, stop, b" \t'")
        if a_len == 0:
            a_off = 0
    elif kind == OP_INFO:
        a_off, a_len = _trim(data, start, stop, b" \t")
        if a_len == 0:
            raise _Fail(ERR_ARGS)
    else:
        if _trim(data, start, stop, b" \t")[1]:
            raise _Fail(ERR_ARGS)
        a_off = a_len = 0
    return [kind, a_off, a_len, 0, 0, 0, 0, 0, 0, 0]


def _trim(data: bytes | bytearray, start: int, stop: int, chars: bytes) -> tuple[int, int]:
    """Return ``(offset, length)`` of ``data[start:stop]`` stripped of ``chars``."""
    text = bytes(data[start:stop])
    stripped = text.lstrip(chars)
    off = start + len(text) - len(stripped)
    return off, len(stripped.rstrip(chars))


def _parse_msg(
    data: bytes | bytearray, pos: int, start: int, stop: int, end: int, kind: int
) -> tuple[list[int], int]:
    """Parse MSG/HMSG arguments in ``data[start:stop]`` and the payload after them."""
    tokens = [m.span() for m in _TOKEN.finditer(data, start, stop)]
    headers = kind == OP_HMSG
    min_tok = 4 if headers else 3
    if len(tokens) not in (min_tok, min_tok + 1):
        raise _Fail(ERR_ARGS)
    a_off, a_stop = tokens[0]
    r_off, r_stop = tokens[2] if len(tokens) == min_tok + 1 else (0, 0)
    sid = _uint(data, tokens[1])
    hdr = _uint(data, tokens[-2]) if headers else 0
    total = _uint(data, tokens[-1])
    if total > MAX_PAYLOAD:
        raise _Fail(ERR_SIZE)
    if headers and (hdr > total or hdr < MIN_HEADER_BLOCK):
        raise _Fail(ERR_HDR_SIZE)
    head = [kind, a_off, a_stop - a_off, sid, r_off, r_stop - r_off]
    body, after = _body(data, pos, stop + 2, end, headers, hdr, total)
    return head + body, after


def _body(
    data: bytes | bytearray, pos: int, body: int, end: int, headers: bool, hdr: int, total: int
) -> tuple[list[int], int]:
    """Check the payload starting at ``body``; return ``[h_off, h_len, p_off, p_len]``
    and the index just past the op."""
    payload_end = body + total
    if end - body < total + 2:
        raise _NeedMore(payload_end + 2 - pos)
    if data[payload_end : payload_end + 2] != b"\r\n":
        raise _Fail(ERR_PAYLOAD_END)
    if not headers:
        return [0, 0, body, total], payload_end + 2
    if data[body : body + 8] != b"NATS/1.0" or data[body + hdr - 4 : body + hdr] != b"\r\n\r\n":
        raise _Fail(ERR_HDR_BLOCK)
    return [body, hdr, body + hdr, total - hdr], payload_end + 2


def _uint(data: bytes | bytearray, span: tuple[int, int]) -> int:
    """Unsigned decimal in ``data[span]`` that fits an int64."""
    token = bytes(data[span[0] : span[1]])
    if not token.isdigit():
        raise _Fail(ERR_NUMBER)
    significant = token.lstrip(b"0")
    if len(significant) > 19 or (significant and int(significant) > _INT64_MAX):
        raise _Fail(ERR_NUMBER)
    return int(significant or b"0")


# ---------------------------------------------------------------------------
# parse_headers


def parse_headers(block: BytesLike) -> tuple[int | None, str, list[tuple[str, str]]]:
    """Parse a header block as located by ``parse``'s h fields.

    Args:
        block: the raw bytes from ``NATS/1.0`` up to and including the blank line.

    Returns:
        ``(status, description, pairs)``: the 3-digit status code or None, the
        text after it ("" if none), and every ``(key, value)`` in wire order
        (values stripped of spaces and tabs), decoded as UTF-8 with
        ``surrogateescape``.

    Raises:
        ProtocolError: the block is not a valid NATS header block.
    """
    data = bytes(block)
    if data[:8] != b"NATS/1.0":
        raise protocol_error(ERR_HDR_PREFIX, data, 0, len(data))
    if len(data) < MIN_HEADER_BLOCK or data[-4:] != b"\r\n\r\n":
        raise protocol_error(ERR_HDR_END, data, 0, len(data))
    status: int | None = None
    description = ""
    pairs: list[tuple[str, str]] = []
    pos = 0
    for index, line in enumerate(data[:-4].split(b"\r\n")):
        if b"\r" in line or b"\n" in line:
            raise protocol_error(ERR_HDR_CRLF, data, pos, len(data))
        if index == 0:
            status, description = _status_line(line, data, pos, len(data))
        else:
            pairs.append(_header_line(line, data, pos))
        pos += len(line) + 2
    return status, description, pairs


_STATUS = re.compile(rb"[ \t]*([^ \t]*)(.*)", re.DOTALL)


def _status_line(line: bytes, data: bytes, pos: int, end: int) -> tuple[int | None, str]:
    """Status code and description of the ``NATS/1.0`` line (``data[:end]`` holds its block)."""
    rest = line[8:]
    if rest and rest[:1] not in (b" ", b"\t"):
        raise protocol_error(ERR_HDR_PREFIX, data, pos, end)
    match = _STATUS.match(rest)
    assert match is not None  # the pattern matches any bytes
    code, description = match.groups()
    if not code:
        return None, ""
    if len(code) != 3 or not code.isdigit():
        raise protocol_error(ERR_HDR_STATUS, data, pos, end)
    return int(code), description.strip(b" \t").decode("utf-8", "surrogateescape")


def _header_line(line: bytes, data: bytes, pos: int) -> tuple[str, str]:
    """One ``Key: value`` pair."""
    key, colon, value = line.partition(b":")
    if not colon:
        raise protocol_error(ERR_HDR_LINE, data, pos, len(data))
    if not key:
        raise protocol_error(ERR_HDR_KEY, data, pos, len(data))
    return (
        key.decode("utf-8", "surrogateescape"),
        value.strip(b" \t").decode("utf-8", "surrogateescape"),
    )


# ---------------------------------------------------------------------------
# encoders and subjects

_BAD_KEY_BYTE = re.compile(rb"[\x00-\x20:\x7f]")


def _header_bytes(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"header {what} must be str, not {type(text).__name__}")
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise BadHeaderError(f"header {what} {text!r} cannot be encoded: {exc}") from None


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """Encode header pairs as a NATS/1.0 header block.

    Args:
        pairs: ``(key, value)`` strings, in the order to send them.

    Returns:
        ``b"NATS/1.0\\r\\n" + b"Key: value\\r\\n"... + b"\\r\\n"``.

    Raises:
        BadHeaderError: a key is empty or holds CR, LF, ':', space, tab or any
            byte below 0x21 or 0x7f, or a value holds CR, LF or NUL; nothing is
            encoded.
        TypeError: a key or value is not a str.
    """
    parts = [b"NATS/1.0\r\n"]
    for key, value in pairs:
        raw_key = _header_bytes(key, "key")
        raw_value = _header_bytes(value, "value")
        if not raw_key or _BAD_KEY_BYTE.search(raw_key):
            raise BadHeaderError(f"invalid header key {key!r}")
        # NUL too: the C encoder separates pairs with it (and Go's textproto
        # readers refuse control bytes in values anyway).
        if b"\r" in raw_value or b"\n" in raw_value or b"\0" in raw_value:
            raise BadHeaderError(f"header {key!r} has CR, LF or NUL in its value")
        parts.append(b"%s: %s\r\n" % (raw_key, raw_value))
    parts.append(b"\r\n")
    return b"".join(parts)


# Frames with a payload above this are built with b"".join: from 128 KiB on,
# %-formatting costs 20x more (measured, CPython 3.11, best of 7, µs per frame:
# 64 KiB 1.6 both; 128 KiB 71 vs 3.4; 1 MiB 348 vs 54; 4 MiB 2,646 vs 392),
# while below 64 KiB % is as fast or a little faster (128 B: 0.17 vs 0.22).
JOIN_ABOVE = 64 * 1024


def _frame(head: bytes, header_block: bytes, payload: BytesLike, size: int) -> bytes:
    """head + header_block + payload + CRLF, by the faster method for size."""
    if size > JOIN_ABOVE:
        try:
            return b"".join((head, header_block, payload, b"\r\n"))
        except TypeError:  # a non-contiguous memoryview: % copes with it
            pass
    return b"%s%s%s\r\n" % (head, header_block, payload)


def encode_pub(subject: bytes, reply: bytes, payload: BytesLike) -> bytes:
    """Encode a PUB frame: ``PUB <subject> [<reply> ]<len>\\r\\n<payload>\\r\\n``.

    Args:
        subject: the subject (already validated).
        reply: the reply subject, or ``b""`` for none.
        payload: any bytes-like object.

    Returns:
        The whole frame.
    """
    size = len(payload) if type(payload) is bytes else memoryview(payload).nbytes
    if size <= JOIN_ABOVE:
        if reply:
            return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, size, payload)
        return b"PUB %s %d\r\n%s\r\n" % (subject, size, payload)
    if reply:
        head = b"PUB %s %s %d\r\n" % (subject, reply, size)
    else:
        head = b"PUB %s %d\r\n" % (subject, size)
    return _frame(head, b"", payload, size)


def encode_hpub(subject: bytes, reply: bytes, header_block: bytes, payload: BytesLike) -> bytes:
    """Encode an HPUB frame with a header block from :func:`encode_headers`.

    Args:
        subject: the subject (already validated).
        reply: the reply subject, or ``b""`` for none.
        header_block: the encoded headers.
        payload: any bytes-like object.

    Returns:
        ``HPUB <subject> [<reply> ]<hdr_len> <total_len>\\r\\n<headers><payload>\\r\\n``.
    """
    hdr_len = len(header_block)
    size = len(payload) if type(payload) is bytes else memoryview(payload).nbytes
    if reply:
        head = b"HPUB %s %s %d %d\r\n" % (subject, reply, hdr_len, hdr_len + size)
    else:
        head = b"HPUB %s %d %d\r\n" % (subject, hdr_len, hdr_len + size)
    return _frame(head, header_block, payload, size)


def encode_hpub_pairs(
    subject: bytes, reply: bytes, pairs: Iterable[tuple[str, str]], payload: BytesLike
) -> bytes:
    """Encode an HPUB frame straight from header pairs.

    Same as ``encode_hpub(subject, reply, encode_headers(pairs), payload)``
    (the C core does it in one call).

    Args:
        subject: the subject (already validated).
        reply: the reply subject, or ``b""`` for none.
        pairs: ``(key, value)`` strings, in the order to send them.
        payload: any bytes-like object.

    Returns:
        ``HPUB <subject> [<reply> ]<hdr_len> <total_len>\\r\\n<headers><payload>\\r\\n``.

    Raises:
        BadHeaderError: as :func:`encode_headers`.
        TypeError: a key or value is not a str.
    """
    return encode_hpub(subject, reply, encode_headers(pairs), payload)


_SUBJECT_BAD_BYTE = re.compile(rb"[ \t\n\v\f\r\x00]")


def valid_subject(subject: bytes, wildcards: bool) -> bool:
    """Tell whether ``subject`` is a valid subject.

    Args:
        subject: the subject bytes.
        wildcards: allow ``*`` tokens and a final ``>`` token (subscriptions).

    Returns:
        True for non-empty dot-separated non-empty tokens without ASCII
        whitespace (space, ``\\t \\n \\v \\f \\r``) or NUL, where ``*``/``>``
        tokens obey ``wildcards`` (``>`` only as the last token).
    """
    if type(subject) is not bytes:
        subject = bytes(subject)
    if not subject or _SUBJECT_BAD_BYTE.search(subject):
        return False
    tokens = subject.split(b".")
    if b"" in tokens:
        return False
    if wildcards:
        return b">" not in tokens[:-1]
    return b"*" not in tokens and b">" not in tokens


# ---------------------------------------------------------------------------
# parse_puback


class _Object(list[tuple[str, object]]):
    """A JSON object as its list of pairs (so duplicate keys stay visible)."""


class _IntText(str):
    """A JSON integer kept as text (no int() digit limit, sign visible)."""


class _FloatText(str):
    """A JSON non-integer number kept as text."""


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_PUBACK_KEYS = ("stream", "seq", "duplicate", "domain")


def parse_puback(data: BytesLike) -> tuple[str, int, bool, str | None] | None:
    """Read a JetStream PubAck body the fast way, or decline.

    Args:
        data: the reply payload (bytes-like).

    Returns:
        ``(stream, seq, duplicate, domain)`` for a flat JSON object with a
        plain-string ``stream`` and a non-negative integer ``seq``; None for
        anything else (an ``error`` key, nesting, escapes, non-ASCII,
        duplicate keys, malformed JSON...), meaning "use json.loads".
    """
    members = _puback_members(bytes(data))
    return None if members is None else members[:4]


def _puback_members(raw: bytes) -> tuple[str, int, bool, str | None, bool] | None:
    """:func:`parse_puback`'s fields and whether the body had other members, or None."""
    if not raw.isascii() or b"\\" in raw:
        return None
    try:
        obj = json.loads(
            raw.decode("ascii"),
            object_pairs_hook=_Object,
            parse_int=_IntText,
            parse_float=_FloatText,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError):
        return None
    fields = _puback_fields(obj)
    if fields is None:
        return None
    stream, seq = fields.get("stream"), fields.get("seq")
    duplicate, domain = fields.get("duplicate", False), fields.get("domain")
    if type(stream) is not str or type(seq) is not _IntText or seq.startswith("-"):
        return None
    if len(seq) > 19 or int(seq) > _INT64_MAX:
        return None
    if type(duplicate) is not bool or ("domain" in fields and type(domain) is not str):
        return None
    others = len(cast("_Object", obj)) != len(fields)
    return stream, int(seq), duplicate, cast("str | None", domain), others


def _puback_fields(obj: object) -> dict[str, object] | None:
    """The PubAck members of a flat object, or None when it is not one."""
    if type(obj) is not _Object:
        return None
    fields: dict[str, object] = {}
    for key, value in obj:
        if isinstance(value, list) or key == "error" or key in fields:
            return None
        if key in _PUBACK_KEYS:
            fields[key] = value
    return fields


# ---------------------------------------------------------------------------
# puback_batch

ACK_SAME = 0  # a plain PubAck of the same stream and domain as the plain one before it
ACK_NEW = 1  # a plain PubAck, the first of the buffer or of another stream or domain
ACK_OTHER = 2  # anything else: headers, a status, an error, a duplicate, other members...


class AckBatch(NamedTuple):
    """The async-publish acks of one buffer, decoded by :func:`puback_batch`.

    Attributes:
        tokens: each reply's token (its subject after the prefix), -1 when not a decimal.
        kinds: one byte per reply: ``ACK_SAME``, ``ACK_NEW`` or ``ACK_OTHER``.
        seqs: each plain PubAck's sequence (0 for ``ACK_OTHER``).
        streams: ``(stream, domain)`` of each ``ACK_NEW`` reply, in order.
        others: ``(payload, header block or None)`` of each ``ACK_OTHER`` reply, in order.
    """

    tokens: list[int]
    kinds: bytes
    seqs: list[int]
    streams: list[tuple[str, str | None]]
    others: list[tuple[bytes, bytes | None]]


def puback_batch(buf: BytesLike, start: int, end: int, sid: int, prefix_len: int) -> AckBatch:
    """Decode the replies of subscription ``sid`` among the whole ops in ``buf[start:end]``.

    A plain PubAck is an ``MSG`` whose body :func:`parse_puback` reads, with no
    members but ``stream``, ``seq``, ``domain`` and a false ``duplicate``. Other
    ops, and incomplete ones at the end, are skipped.

    Args:
        buf: the received bytes.
        start: index of the first op.
        end: index just past the last received byte.
        sid: the reply route's subscription.
        prefix_len: bytes of the reply subjects before the token.

    Raises:
        ProtocolError: the bytes are not protocol (as :func:`parse`).
        ValueError: the window does not fit the buffer.
    """
    ops, _consumed, _need = parse(buf, start, end)
    raw = bytes(buf)
    batch = AckBatch([], b"", [], [], [])
    kinds = bytearray()
    previous: tuple[str, str | None] | None = None
    for i in range(0, len(ops), OP_FIELDS):
        kind, so, sl, op_sid, _ro, _rl, ho, hl, po, pl = ops[i : i + OP_FIELDS]
        if (kind != OP_MSG and kind != OP_HMSG) or op_sid != sid:
            continue
        digits = raw[so + prefix_len : so + sl]
        plain = _puback_members(raw[po : po + pl]) if kind == OP_MSG else None
        token = -1
        if sl > prefix_len and digits.isdigit() and int(digits) <= _INT64_MAX:
            token = int(digits)
        batch.tokens.append(token)
        if plain is None or plain[4] or plain[2]:
            kinds.append(ACK_OTHER)
            batch.seqs.append(0)
            batch.others.append((raw[po : po + pl], raw[ho : ho + hl] if hl else None))
            continue
        stream, seq, _duplicate, domain, _others = plain
        batch.seqs.append(seq)
        if previous == (stream, domain):
            kinds.append(ACK_SAME)
            continue
        previous = (stream, domain)
        kinds.append(ACK_NEW)
        batch.streams.append(previous)
    return batch._replace(kinds=bytes(kinds))


# ---------------------------------------------------------------------------
# encode_batch_hpub

# Its error codes (besides ENC_ERR_KEY / ENC_ERR_VALUE / ENC_ERR_KV for a row's headers).
ENC_ERR_KEY = -1
ENC_ERR_VALUE = -2
ENC_ERR_KV = -3
BATCH_ERR_NULL_DATA = -21
BATCH_ERR_NO_SUBJECT = -22
BATCH_ERR_SUBJECT = -23
BATCH_ERR_MSG_ID = -24
BATCH_ERR_TOO_BIG = -25
BATCH_ERRORS = {
    ENC_ERR_KEY: "a header key is empty or holds a byte below 0x21, ':' or 0x7f",
    ENC_ERR_VALUE: "a header value holds CR or LF",
    ENC_ERR_KV: "the header pairs are not key NUL value NUL ...",
    BATCH_ERR_NULL_DATA: "null data",
    BATCH_ERR_NO_SUBJECT: "no subject (null or empty, and no default subject)",
    BATCH_ERR_SUBJECT: "not a subject to publish to",
    BATCH_ERR_MSG_ID: "the msg id holds CR or LF",
    BATCH_ERR_TOO_BIG: "headers and payload are larger than the server's max_payload",
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
    id_prefix: bytes,
    first_index: int,
    reply_prefix: bytes,
    first_token: int,
    max_payload: int,
) -> tuple[bytes, int, int]:
    """Encode rows ``start..end-1`` of a batch as JetStream HPUB frames, in one call.

    Row ``r`` becomes ``HPUB <subject> <reply_prefix><token> <hdr> <total>``
    with token ``first_token + r - start``, its header pairs (``headers``:
    ``key NUL value NUL ...`` per row) and ``Nats-Msg-Id``: the row's
    ``msg_ids`` value, or when that is null (or there is no such column)
    ``id_prefix + str(first_index + r - start) + ":"`` and the 12 hex digits
    of ``blake2b(payload, digest_size=6, key=subject[:64])``. A null or
    empty subject takes ``default_subject``.

    Args:
        payloads: the message bodies (a null row is an error).
        subjects: the subjects, or None for ``default_subject`` everywhere.
        msg_ids: explicit message ids, or None to derive them all.
        headers: each row's header pairs, or None.
        start: the first row to encode.
        end: one past the last row to encode.
        default_subject: the subject of rows without one (``b""``: none).
        id_prefix: what derived ids start with.
        first_index: the index in derived ids of row ``start``.
        reply_prefix: what every reply subject starts with.
        first_token: the reply token of row ``start``.
        max_payload: the most bytes of header block and payload per message.

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
        kv = _row(headers, hdr_off, r)
        lines = _kv_lines(kv) if kv is not None else b""
        if isinstance(lines, int):
            return bytes(out), r, lines
        msg_id = _row(msg_ids, id_off, r)
        if msg_id is None:
            digest = hashlib.blake2b(payload, digest_size=6, key=subject[:64]).hexdigest()
            msg_id = b"%s%d:%s" % (id_prefix, first_index + r - start, digest.encode())
        elif b"\r" in msg_id or b"\n" in msg_id:
            return bytes(out), r, BATCH_ERR_MSG_ID
        block = b"NATS/1.0\r\n%sNats-Msg-Id: %s\r\n\r\n" % (lines, msg_id)
        if len(block) + len(payload) > max_payload:
            return bytes(out), r, BATCH_ERR_TOO_BIG
        out += b"HPUB %s %s%d %d %d\r\n%s%s\r\n" % (
            subject, reply_prefix, first_token + r - start,
            len(block), len(block) + len(payload), block, payload,
        )  # fmt: skip
    return bytes(out), -1, 0


# ---------------------------------------------------------------------------
# parse_direct_meta

_DIRECT_META_KEYS = (b"Nats-Subject", b"Nats-Sequence", b"Nats-Time-Stamp", b"KV-Operation",
                     b"Nats-Marker-Reason")  # fmt: skip
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_STAMP_DIGITS = (slice(0, 4), slice(5, 7), slice(8, 10), slice(11, 13), slice(14, 16),
                 slice(17, 19))  # fmt: skip

DirectMeta: TypeAlias = tuple[str, int, int, str | None, str | None]
"""``(subject, seq, time_ns, kv_operation, marker_reason)`` of a direct-get reply."""


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (as the C core computes them)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _stamp_ns(t: bytes) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS[.1-9 digits]Z`` (years 1970..2261) in ns since the epoch, or None."""
    n = len(t)
    if n < 20 or n > 30 or t[4:5] != b"-" or t[7:8] != b"-" or t[10:11] != b"T":
        return None
    if t[13:14] != b":" or t[16:17] != b":" or t[-1:] != b"Z":
        return None
    parts = [t[s] for s in _STAMP_DIGITS]
    if not all(p.isdigit() for p in parts):
        return None
    year, month, day, hour, minute, second = map(int, parts)
    if not (1970 <= year <= 2261 and 1 <= month <= 12 and day >= 1):
        return None
    leap = month == 2 and ((year % 4 == 0 and year % 100 != 0) or year % 400 == 0)
    if day > _MONTH_DAYS[month - 1] + leap or hour > 23 or minute > 59 or second > 59:
        return None
    frac = 0
    if n > 20:
        digits = t[20:-1]
        if t[19:20] != b"." or not digits or not digits.isdigit():
            return None
        frac = int(digits) * 10 ** (9 - len(digits))
    secs = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return secs * 1_000_000_000 + frac


def parse_direct_meta(block: BytesLike) -> DirectMeta | None:
    """Read what a direct-get reply's header block says of the stored message, or decline.

    One pass over the block for the first ``Nats-Subject``, ``Nats-Sequence``,
    ``Nats-Time-Stamp``, ``KV-Operation`` and ``Nats-Marker-Reason`` (keys
    matched exactly, values trimmed of blanks as :func:`parse_headers` does),
    instead of building every header pair.

    Args:
        block: the raw header block (``NATS/1.0\\r\\n`` ... blank line).

    Returns:
        ``(subject, seq, time_ns, kv_operation, marker_reason)`` (the last two
        None when absent; strings decoded as :func:`parse_headers` does), or
        None when the block has a status line, is not a valid header block,
        lacks one of the first three headers, or has a sequence or time stamp
        outside the fast path (a sequence beyond int64, a time stamp not of
        the server's ``YYYY-MM-DDTHH:MM:SS[.fraction]Z`` form in 1970..2261):
        the caller then uses :func:`parse_headers`.
    """
    raw = bytes(block)
    if len(raw) < 14 or raw[:10] != b"NATS/1.0\r\n" or raw[-4:] != b"\r\n\r\n":
        return None
    found: list[bytes | None] = [None] * 5
    for line in raw[10:-4].split(b"\r\n"):
        if b"\r" in line or b"\n" in line:
            return None
        key, colon, value = line.partition(b":")
        if not colon or not key:
            return None
        for k, name in enumerate(_DIRECT_META_KEYS):
            if found[k] is None and key == name:
                found[k] = value.strip(b" \t")
                break
    subject, seq, stamp, op, reason = found
    if subject is None or seq is None or stamp is None:
        return None
    if not seq.isdigit() or len(seq.lstrip(b"0")) > 19 or int(seq) > _INT64_MAX:
        return None
    ns = _stamp_ns(stamp)
    if ns is None:
        return None
    return (
        subject.decode("utf-8", "surrogateescape"),
        int(seq),
        ns,
        None if op is None else op.decode("utf-8", "surrogateescape"),
        None if reason is None else reason.decode("utf-8", "surrogateescape"),
    )


# ---------------------------------------------------------------------------
# round_trip and send_nowait: the functions that do IO (csrc/jss_round_trip.c)

RT_REPLY = 1
RT_OTHER = 2
RT_SEND_PARTIAL = 3
RT_IDLE = 4
RT_WOKEN = 5
RT_INTERRUPTED = 6
RT_EOF = 7
RT_SEND_ERROR = 8
RT_RECV_ERROR = 9
# Slots of round_trip's out list (see jss_proto.h; the Python list stops before RT_PUBACK).
RT_SENT = 0
RT_RECEIVED = 1
RT_CONSUMED = 2
RT_NEED = 3
RT_ERRNO = 4
RT_PUBACK_OK = 5
RT_OP = 6
RT_PUBACK = 16
RT_FIELDS = 22
RoundTrip: TypeAlias = tuple[int, list[int], tuple[str, int, bool, str | None] | None]
"""What :func:`round_trip` returns: status, out, PubAck fields."""
_RT_POLL_IN = select.POLLIN
_RT_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


def round_trip(
    sock: socket.socket,
    wake_fd: int,
    frame: bytes,
    buf: bytearray,
    have: int,
    reply: bytes,
    timeout_ms: int,
    want_puback: bool,
) -> RoundTrip:
    """Send ``frame``, wait for ``sock``, receive once into ``buf`` and look for the reply.

    The caller's whole round trip in one call (in C, with the GIL released):
    see ``jss_round_trip`` in ``csrc/jss_proto.h`` for every status. ``sock``
    is borrowed (never closed, its mode unchanged: only non-blocking calls);
    ``buf[:have]`` holds bytes received earlier and not yet parsed; what is
    received lands in ``buf[have:]``.

    EINTR: Python retries an interrupted system call after running the
    signal handlers (PEP 475), and a handler's exception propagates, so this
    twin never returns :data:`RT_INTERRUPTED`.

    Returns:
        ``(status, out, puback)``: an ``RT_*`` status; :data:`RT_PUBACK` ints
        (bytes sent, bytes received, bytes consumed and the next op's need
        for :data:`RT_REPLY`, errno, 1 when ``puback`` is set, then the
        reply's :data:`OP_FIELDS`); and, with ``want_puback``, what
        :func:`parse_puback` reads from a reply without headers, else None.
    """
    result = _round_trip(sock, wake_fd, frame, buf, have, reply, timeout_ms, want_puback)
    _last.out = None  # returned: nothing is pending for last_round_trip
    return result


def _round_trip(
    sock: socket.socket,
    wake_fd: int,
    frame: bytes,
    buf: bytearray,
    have: int,
    reply: bytes,
    timeout_ms: int,
    want_puback: bool,
) -> RoundTrip:
    """round_trip's system calls and parse; ``_last.out`` holds its out list meanwhile."""
    out = _last.out = [0] * RT_PUBACK
    sent, size = 0, len(frame)
    while sent < size:
        try:
            sent += sock.send(frame[sent:], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            out[RT_SENT] = sent
        except (BlockingIOError, InterruptedError):
            break
        except OSError as exc:
            out[RT_SENT], out[RT_ERRNO] = sent, exc.errno or 0
            return RT_SEND_ERROR, out, None
    out[RT_SENT] = sent
    if sent < size:
        return RT_SEND_PARTIAL, out, None
    if have >= len(buf):
        return RT_IDLE, out, None
    fd = sock.fileno()
    poller = select.poll()
    poller.register(fd, _RT_POLL_IN)
    if wake_fd >= 0:
        poller.register(wake_fd, _RT_POLL_IN)
    try:
        ready = poller.poll(timeout_ms)
    except OSError as exc:
        out[RT_ERRNO] = exc.errno or 0
        return RT_RECV_ERROR, out, None
    if not ready:
        return RT_IDLE, out, None
    if not any(polled == fd for polled, _ in ready):
        return RT_WOKEN, out, None
    try:
        out[RT_RECEIVED] = got = sock.recv_into(memoryview(buf)[have:], 0, socket.MSG_DONTWAIT)
    except OSError as exc:
        out[RT_ERRNO] = exc.errno or 0
        return (RT_IDLE if exc.errno in _RT_AGAIN else RT_RECV_ERROR), out, None
    if got == 0:
        return RT_EOF, out, None
    return _parse_reply(buf, have + got, reply, want_puback, out)


# Slots of send_nowait's report (see jss_proto.h).
SEND_SENT = 0
SEND_ERRNO = 1
SEND_FIELDS = 2


def send_report() -> list[int]:
    """Where :func:`send_nowait` reports: ``[bytes sent, errno]``, owned by the caller."""
    return [0] * SEND_FIELDS


def send_nowait(sock: socket.socket, data: bytearray, report: list[int]) -> None:
    """Send what ``sock`` takes at once of ``data``, without blocking; report it in ``report``.

    Non-blocking sends until all of ``data`` is sent or the socket takes no
    more (not a failure). ``report[SEND_SENT]`` is the bytes sent so far,
    updated after each send, and ``report[SEND_ERRNO]`` the errno of a send
    that failed (0 when none did). The C function writes the report in C
    memory, so that a caller interrupted right after the call (a signal
    handler's exception on the main thread) still knows what went out; this
    twin is not interruptible that way (a handler may run between its steps).
    """
    report[SEND_SENT] = report[SEND_ERRNO] = 0
    sent, size = 0, len(data)
    with memoryview(data) as view:
        while sent < size:
            try:
                sent += sock.send(view[sent:], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                report[SEND_ERRNO] = exc.errno or 0
                return
            report[SEND_SENT] = sent


_last = threading.local()  # each thread's last round_trip out list


def last_round_trip() -> tuple[int, int]:
    """``(sent, received)`` of this thread's :func:`round_trip` call that did not return.

    For a caller interrupted (Ctrl-C) inside the call; ``(0, 0)`` once a call
    returned (the caller has them) or before any call.
    """
    out = getattr(_last, "out", None)
    return (0, 0) if out is None else (out[RT_SENT], out[RT_RECEIVED])


def _parse_reply(
    buf: bytearray, end: int, reply: bytes, want_puback: bool, out: list[int]
) -> RoundTrip:
    """round_trip's last step: whether ``buf[:end]`` holds exactly the reply (fills ``out``)."""
    try:
        ops, consumed, need = parse(buf, 0, end)
    except ProtocolError:
        return RT_OTHER, out, None
    if len(ops) != OP_FIELDS or ops[0] not in (OP_MSG, OP_HMSG):
        return RT_OTHER, out, None
    if buf[ops[1] : ops[1] + ops[2]] != reply:
        return RT_OTHER, out, None
    out[RT_CONSUMED], out[RT_NEED] = consumed, need
    out[RT_OP : RT_OP + OP_FIELDS] = ops
    puback = None
    if want_puback and ops[0] == OP_MSG:
        puback = parse_puback(buf[ops[8] : ops[8] + ops[9]])
        out[RT_PUBACK_OK] = int(puback is not None)
    return RT_REPLY, out, puback
