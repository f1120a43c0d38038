"""A JetStream PubAck body read the fast way, and the async-publish acks of one buffer
(mirrors ``csrc/jss_puback.c``)."""

from __future__ import annotations

import json
from typing import NamedTuple, NoReturn, cast

from .parser import parse
from .proto import _INT64_MAX, OP_FIELDS, OP_HMSG, OP_MSG, BytesLike

__all__ = ["ACK_NEW", "ACK_OTHER", "ACK_SAME", "AckBatch", "parse_puback", "puback_batch"]


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
