"""Other server replies: account info, publish acks, stored messages.

Built with ``from_api`` from the server's JSON; ``to_api`` gives it back.
Also re-exported by :mod:`.info`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from .._timefmt import datetime_to_ns, format_rfc3339, parse_rfc3339
from ..headers import Headers, header_pairs
from ._codec import (
    OBJ,
    OBJMAP,
    Wire,
    extra_field,
    info_field,
)

__all__ = [
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AccountTier",
    "ArrowPubAck",
    "PubAck",
    "RawStreamMsg",
    "format_header_block",
    "parse_header_block",
]

field = info_field


@attrs.frozen(kw_only=True, repr=False)
class AccountLimits(Wire):
    """An account's JetStream limits (-1: unlimited).

    Attributes:
        max_memory: bytes of memory storage.
        max_storage: bytes of file storage.
        max_streams: streams.
        max_consumers: consumers.
        max_ack_pending: the highest ``max_ack_pending`` a consumer may have.
        memory_max_stream_bytes: the largest memory stream, in bytes.
        storage_max_stream_bytes: the largest file stream, in bytes.
        max_bytes_required: streams must set ``max_bytes``.
        extra: wire keys this client does not know.
    """

    max_memory: int = field("max_memory", default=-1)
    max_storage: int = field("max_storage", default=-1)
    max_streams: int = field("max_streams", default=-1)
    max_consumers: int = field("max_consumers", default=-1)
    max_ack_pending: int = field("max_ack_pending", default=-1)
    memory_max_stream_bytes: int = field("memory_max_stream_bytes", default=-1)
    storage_max_stream_bytes: int = field("storage_max_stream_bytes", default=-1)
    max_bytes_required: bool = field("max_bytes_required", default=False)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class APIStats(Wire):
    """JetStream API usage.

    Attributes:
        level: the API level the server implements (5 for 2.15).
        total: API requests served.
        errors: API requests that failed.
        inflight: API requests being served now.
        extra: wire keys this client does not know.
    """

    level: int = field("level", default=0)
    total: int = field("total", default=0)
    errors: int = field("errors", default=0)
    inflight: int = field("inflight", default=0, omit_zero=True)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class AccountTier(Wire):
    """Usage and limits of one tier (e.g. ``R1``, ``R3``) of an account.

    Attributes:
        memory: bytes of memory storage used.
        storage: bytes of file storage used.
        reserved_memory: bytes of memory storage reserved.
        reserved_storage: bytes of file storage reserved.
        streams: streams.
        consumers: consumers.
        limits: the tier's limits.
        extra: wire keys this client does not know.
    """

    memory: int = field("memory", default=0)
    storage: int = field("storage", default=0)
    reserved_memory: int = field("reserved_memory", default=0)
    reserved_storage: int = field("reserved_storage", default=0)
    streams: int = field("streams", default=0)
    consumers: int = field("consumers", default=0)
    limits: AccountLimits | None = field("limits", OBJ, cls=AccountLimits)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class AccountInfo(Wire):
    """An account's JetStream usage, limits and API statistics.

    The usage fields are totals over every tier.

    Attributes:
        memory: bytes of memory storage used.
        storage: bytes of file storage used.
        reserved_memory: bytes of memory storage reserved.
        reserved_storage: bytes of file storage reserved.
        streams: streams.
        consumers: consumers.
        limits: the account's limits (unset when limits are tiered).
        domain: the JetStream domain.
        api: API usage.
        tiers: tier name -> usage and limits, when limits are tiered.
        extra: wire keys this client does not know.
    """

    memory: int = field("memory", default=0)
    storage: int = field("storage", default=0)
    reserved_memory: int = field("reserved_memory", default=0)
    reserved_storage: int = field("reserved_storage", default=0)
    streams: int = field("streams", default=0)
    consumers: int = field("consumers", default=0)
    limits: AccountLimits | None = field("limits", OBJ, cls=AccountLimits)
    domain: str | None = field("domain")
    api: APIStats | None = field("api", OBJ, cls=APIStats)
    tiers: Mapping[str, AccountTier] | None = field("tiers", OBJMAP, cls=AccountTier)
    extra: Mapping[str, Any] = extra_field()

    _ENVELOPE: ClassVar[frozenset[str]] = frozenset({"type", "error"})


@attrs.frozen(kw_only=True, repr=False, slots=False)
class PubAck(Wire):
    """The server's acknowledgement of a JetStream publish.

    Attributes:
        stream: the stream that stored the message.
        seq: its sequence (for a batch: the last message's).
        duplicate: the message was a duplicate (``Nats-Msg-Id``) and not stored again.
        domain: the stream's JetStream domain.
        val: a counter stream's new total, as the server's decimal string.
        batch_id: the atomic batch's id (2.12+).
        batch_size: the number of messages the batch committed (2.12+).
        extra: wire keys this client does not know.
    """

    stream: str = field("stream", default=attrs.NOTHING)
    seq: int = field("seq", default=attrs.NOTHING)
    duplicate: bool = field("duplicate", default=False, omit_zero=True)
    domain: str | None = field("domain")
    val: str | None = field("val")
    batch_id: str | None = field("batch")
    batch_size: int | None = field("count")
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True)
class ArrowPubAck:
    """What :meth:`JetStreamContext.publish_arrow` got acknowledged.

    Attributes:
        stream: the stream that stored the rows (None when there were none).
        rows: the rows acknowledged: every row of the table.
        duplicates: rows whose ``Nats-Msg-Id`` the stream had already: not stored again.
    """

    stream: str | None
    rows: int
    duplicates: int


def parse_header_block(raw: bytes) -> Headers:
    """Parse a stored ``NATS/1.0`` header block into :class:`Headers`.

    Bytes that are not UTF-8 are decoded as a received message's headers are
    (``surrogateescape``), so they read the same and encode back to themselves.
    """
    lines = raw.decode("utf-8", "surrogateescape").split("\r\n")
    pairs = []
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep and key:
            pairs.append((key, value.strip(" \t")))  # as the core parser strips
    return Headers.from_pairs(pairs)


def format_header_block(headers: Mapping[str, Any]) -> bytes:
    """The ``NATS/1.0`` header block for ``headers`` (the inverse of :func:`parse_header_block`)."""
    body = "".join(f"{k}: {v}\r\n" for k, v in header_pairs(headers))
    return f"NATS/1.0\r\n{body}\r\n".encode("utf-8", "surrogateescape")


@attrs.frozen(kw_only=True, repr=False)
class RawStreamMsg(Wire):
    """A message read straight from a stream (message get, direct get).

    Attributes:
        subject: the subject it was stored under.
        seq: its stream sequence.
        data: the payload.
        headers: its headers (a :class:`~jetstream_sync.headers.Headers`),
            or ``None`` when it has none.
        time: when it was stored (a ``NanoDatetime``: see ``time_ns``).
        stream: the stream's name, when the reply says it (direct get).
        extra: wire keys this client does not know.
    """

    subject: str = attrs.field(default="")
    seq: int = attrs.field(default=0)
    data: bytes = attrs.field(default=b"")
    headers: Mapping[str, str] | None = attrs.field(default=None, hash=False)
    time: datetime | None = attrs.field(default=None)
    stream: str | None = attrs.field(default=None)
    extra: Mapping[str, Any] = extra_field()

    @property
    def time_ns(self) -> int | None:
        """Nanoseconds since the Unix epoch when it was stored (exact)."""
        return None if self.time is None else datetime_to_ns(self.time)

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> RawStreamMsg:
        """Build from a message get response's ``message`` object (base64 fields)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"RawStreamMsg.from_api expects a dict, got {type(d).__name__}")
        known = {"subject", "seq", "data", "hdrs", "time", "stream"}
        hdrs = d.get("hdrs")
        return cls(
            subject=d.get("subject", ""),
            seq=d.get("seq", 0),
            data=base64.b64decode(d["data"]) if d.get("data") else b"",
            headers=parse_header_block(base64.b64decode(hdrs)) if hdrs else None,
            time=parse_rfc3339(d["time"]) if d.get("time") else None,
            stream=d.get("stream"),
            extra={k: v for k, v in d.items() if k not in known},
        )

    def to_api(self) -> dict[str, Any]:
        """The message get response's ``message`` object."""
        out: dict[str, Any] = {"subject": self.subject, "seq": self.seq}
        if self.headers:
            out["hdrs"] = base64.b64encode(format_header_block(self.headers)).decode()
        if self.data:
            out["data"] = base64.b64encode(self.data).decode()
        if self.time is not None:
            out["time"] = format_rfc3339(self.time)
        if self.stream is not None:
            out["stream"] = self.stream
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out
