"""The op parser: MSG, HMSG, PING, PONG, +OK, -ERR and INFO located in a buffer (mirrors
``csrc/jss_parser.c``)."""

from __future__ import annotations

import re

from .proto import (
    _INT64_MAX,
    ERR_ARGS,
    ERR_BARE_LF,
    ERR_HDR_SIZE,
    ERR_LINE_TOO_LONG,
    ERR_NUMBER,
    ERR_OP,
    ERR_PAYLOAD_END,
    ERR_SIZE,
    ERR_STRAY_CR,
    MAX_CONTROL_LINE,
    MAX_PAYLOAD,
    OP_ERR,
    OP_HMSG,
    OP_INFO,
    OP_MSG,
    OP_OK,
    OP_PING,
    OP_PONG,
    BytesLike,
    check_range,
    protocol_error,
)

__all__ = ["parse"]


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
    if total > MAX_PAYLOAD or (headers and hdr > total):
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
    if headers and hdr > total:
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
    # The block is handed on as it came (another client wrote it; the server does
    # not check it): reading it checks it, so a bad one fails only its message.
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
