"""What a direct-get reply's header block says of the stored message, in one pass (mirrors
``csrc/jss_direct_meta.c``, and ``jss_time_utc_ns`` of ``csrc/jss_time.c`` for its time stamp)."""

from __future__ import annotations

from typing import TypeAlias

from .proto import _INT64_MAX, BytesLike

__all__ = ["DirectMeta", "parse_direct_meta"]


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
