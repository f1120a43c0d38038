"""``KeyValueEntry`` and ``KeyValueOp``: one revision of a key, and how it is decoded."""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from datetime import UTC, datetime

import attrs

from .._protocol import parse_direct_meta
from .._seam import ack_tokens, datetime_from_ns, datetime_to_ns, parse_rfc3339
from ..jetstream.replies import RawStreamMsg
from ..msg import Msg, header_block

__all__ = ["KeyValueEntry", "KeyValueOp", "operation_of"]

OPERATION = "KV-Operation"
MARKER_REASON = "Nats-Marker-Reason"
# What a direct-get reply says about the stored message.
DIRECT_SUBJECT = "Nats-Subject"
DIRECT_SEQUENCE = "Nats-Sequence"
DIRECT_TIMESTAMP = "Nats-Time-Stamp"


class KeyValueOp(enum.StrEnum):
    """What a revision of a key is.

    Attributes:
        PUT: a value.
        DEL: a delete marker (history is kept).
        PURGE: a purge marker (older revisions were removed).
    """

    PUT = "PUT"
    DEL = "DEL"
    PURGE = "PURGE"


# ADR-48: the server's limit markers count as purges (MaxAge, Purge) or deletes (Remove).
_MARKERS = {"MaxAge": KeyValueOp.PURGE, "Purge": KeyValueOp.PURGE, "Remove": KeyValueOp.DEL}
_OPS = {"DEL": KeyValueOp.DEL, "PURGE": KeyValueOp.PURGE}


def operation_of(headers: Mapping[str, str] | None) -> KeyValueOp:
    """The operation a stored message's headers say (PUT when they say nothing)."""
    if not headers:
        return KeyValueOp.PUT
    return _operation(headers.get(OPERATION), headers.get(MARKER_REASON))


def _operation(op: str | None, reason: str | None) -> KeyValueOp:
    """The operation of a ``KV-Operation`` and a ``Nats-Marker-Reason`` value (or None)."""
    if op:
        return _OPS.get(op, KeyValueOp.PUT)
    if reason:
        return _MARKERS.get(reason, KeyValueOp.PUT)
    return KeyValueOp.PUT


@attrs.frozen(kw_only=True, slots=False)
class KeyValueEntry:
    """One revision of a key.

    Attributes:
        bucket: the bucket it was read from.
        key: the key.
        value: the value (``b""`` for a marker, or in a ``meta_only`` watch).
        revision: its stream sequence: unique and increasing within the bucket.
        created_ns: when it was stored, in nanoseconds since the Unix epoch
            (``created`` is the same as a ``datetime``).
        delta: how many newer revisions of the watched keys follow it when it
            was delivered (0 for the latest); 0 from ``get``.
        operation: PUT, DEL or PURGE.
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    created_ns: int
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT

    @property
    def created(self) -> datetime:
        """When it was stored (UTC, a ``NanoDatetime`` that keeps the nanoseconds)."""
        return datetime_from_ns(self.created_ns)


def entry_from_stored(bucket: str, key: str, msg: RawStreamMsg) -> KeyValueEntry:
    """The entry of a message read by a (direct) get."""
    return KeyValueEntry(
        bucket=bucket,
        key=key,
        value=msg.data,
        revision=msg.seq,
        created_ns=msg.time_ns,  # type: ignore[arg-type]
        operation=operation_of(msg.headers),
    )


@functools.lru_cache(maxsize=64)
def _day_seconds(date: str) -> int:
    return int(datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp())


def rfc3339_ns(text: str) -> int:
    """Nanoseconds since the Unix epoch of a server timestamp (RFC 3339).

    The server's usual form, ``2026-11-22T18:06:01.123456789Z``, is read by
    slicing (a get's hot path); any other form goes through ``parse_rfc3339``.

    Raises:
        ValueError: ``text`` is not an RFC 3339 timestamp.
    """
    n = len(text)
    if 20 <= n <= 30 and text[-1] == "Z" and text[10] == "T" and text[19] in ".Z":
        frac = text[20:-1]
        if frac.isdigit() or not frac:
            secs = (
                _day_seconds(text[:10])
                + int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])
            )  # fmt: skip
            return secs * 1_000_000_000 + (int(frac.ljust(9, "0")) if frac else 0)
    return datetime_to_ns(parse_rfc3339(text))


_new = object.__new__
_PUT = KeyValueOp.PUT


def entry_from_direct(bucket: str, key: str, msg: Msg) -> tuple[str, KeyValueEntry]:
    """The stored subject and the entry of a direct-get reply (not a status).

    A get's hot path: the header block is read in one pass by the protocol
    core (``parse_direct_meta``: subject, sequence, time stamp and the two
    operation headers, no ``Headers`` mapping, no ``datetime``) and the
    entry's ``__dict__`` filled directly, as in :func:`entry_from_delivered`.
    A block outside that fast path (an unusual time stamp...) goes through
    the generic header parser.
    """
    block = header_block(msg)
    meta = None if block is None else parse_direct_meta(block)
    if meta is None:
        h = msg.headers
        subject, seq = h[DIRECT_SUBJECT], int(h[DIRECT_SEQUENCE])
        ns = rfc3339_ns(h[DIRECT_TIMESTAMP])
        op, reason = h.get(OPERATION), h.get(MARKER_REASON)
    else:
        subject, seq, ns, op, reason = meta
    entry = _new(KeyValueEntry)
    fields = entry.__dict__
    fields["bucket"] = bucket
    fields["key"] = key
    fields["value"] = msg.data
    fields["revision"] = seq
    fields["created_ns"] = ns
    fields["delta"] = 0
    fields["operation"] = _PUT if op is None and reason is None else _operation(op, reason)
    return subject, entry


def entry_from_delivered(bucket: str, prefix_len: int, msg: Msg) -> KeyValueEntry:
    """The entry of a message a consumer delivered (metadata from its ack subject).

    The watch's hot path: the entry's ``__dict__`` is filled directly instead
    of running the attrs ``__init__`` (about 1 us less per entry; the class
    has no converters or validators to skip).
    """
    tokens = msg.reply.split(".")
    if len(tokens) == 9:  # the v1 ack subject; ack_tokens handles both layouts
        seq, ns, pending = tokens[5], tokens[7], tokens[8]
    else:
        _, _, _, _, _, seq, _, ns, pending = ack_tokens(msg.reply)
    entry = _new(KeyValueEntry)
    fields = entry.__dict__
    fields["bucket"] = bucket
    fields["key"] = msg.subject[prefix_len:]
    fields["value"] = msg.data
    fields["revision"] = int(seq)
    fields["created_ns"] = int(ns)
    fields["delta"] = int(pending)
    fields["operation"] = operation_of(msg.headers)
    return entry
