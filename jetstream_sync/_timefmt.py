"""Time conversions for the JetStream wire format.

The server speaks nanoseconds: durations are integer nanoseconds and
timestamps are RFC 3339 strings with up to nine fractional digits
(``"2026-11-22T04:04:35.123456789Z"``, Go's ``time.RFC3339Nano``). Python
speaks float seconds and microsecond ``datetime``\\ s. This module is the one
place where the two meet:

- :func:`seconds_to_ns` / :func:`ns_to_seconds` for durations (with
  :class:`ExactSeconds` for the few a float cannot hold to the nanosecond);
- :func:`parse_rfc3339` / :func:`format_rfc3339` for timestamps;
- :class:`NanoDatetime`, a ``datetime`` that also remembers the nanoseconds
  below the microsecond, so a timestamp read from the server is written back
  exactly (the server refuses a consumer update whose ``opt_start_time``
  differs by a single nanosecond), and one read in another form than the
  server's own UTC one also keeps that text (:func:`wire_text`).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

__all__ = [
    "GO_ZERO_TIME",
    "ExactSeconds",
    "NanoDatetime",
    "datetime_from_ns",
    "datetime_to_ns",
    "format_rfc3339",
    "ns_to_seconds",
    "parse_rfc3339",
    "seconds_to_ns",
    "to_utc",
    "wire_text",
]

NS_PER_SECOND = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)

#: What Go writes for an unset ``time.Time`` (the zero value).
GO_ZERO_TIME = "0001-01-01T00:00:00Z"


class NanoDatetime(datetime):
    """A timezone-aware UTC ``datetime`` that keeps nanosecond precision.

    It is a plain ``datetime`` for every purpose (comparison, hashing,
    arithmetic, ``isoformat``), all of which work to the microsecond like any
    ``datetime``. The three digits below the microsecond are kept in
    :attr:`nanosecond`; :attr:`epoch_ns` and :meth:`rfc3339` use them.

    Adding or subtracting a ``timedelta``, ``replace`` and ``astimezone``
    keep the nanoseconds; other operations return values with none.

    Attributes:
        nanosecond: nanoseconds below the microsecond (0-999).
        epoch_ns: nanoseconds since 1970-01-01T00:00:00Z (exact).
    """

    __slots__ = ("_nanosecond", "_text")
    _nanosecond: int
    _text: str | None

    def __new__(cls, *args: Any, nanosecond: int = 0, **kwargs: Any) -> NanoDatetime:
        if not 0 <= nanosecond <= 999:
            raise ValueError(f"nanosecond must be in 0..999, not {nanosecond!r}")
        self = super().__new__(cls, *args, **kwargs)
        self._nanosecond = nanosecond
        self._text = None
        return self

    @property
    def nanosecond(self) -> int:
        return self._nanosecond

    @property
    def epoch_ns(self) -> int:
        return datetime_to_ns(self)

    def rfc3339(self) -> str:
        """Return the RFC 3339 form the server uses (see :func:`format_rfc3339`)."""
        return format_rfc3339(self)

    def _with_ns(self, value: Any) -> Any:
        if isinstance(value, NanoDatetime):
            value._nanosecond = self._nanosecond
        return value

    def __add__(self, other: Any) -> Any:
        return self._with_ns(super().__add__(other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self._with_ns(super().__sub__(other))

    def replace(self, *args: Any, nanosecond: int | None = None, **kwargs: Any) -> Any:
        result = super().replace(*args, **kwargs)
        if nanosecond is None:
            return self._with_ns(result)
        if not 0 <= nanosecond <= 999:
            raise ValueError(f"nanosecond must be in 0..999, not {nanosecond!r}")
        result._nanosecond = nanosecond
        return result

    def astimezone(self, tz: Any = None) -> Any:
        return self._with_ns(super().astimezone(tz))

    def __reduce__(self) -> tuple[Any, ...]:
        text = getattr(self, "_text", None)
        if text is not None:  # a copy is sent back in the same text
            return (parse_rfc3339, (text,))
        return (datetime_from_ns, (datetime_to_ns(self),))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def __repr__(self) -> str:
        return f"NanoDatetime({format_rfc3339(self)!r})"


def to_utc(value: datetime, field: str = "value") -> NanoDatetime:
    """Return ``value`` as a UTC :class:`NanoDatetime`.

    Raises:
        TypeError: ``value`` is not a ``datetime``.
        ValueError: ``value`` is naive (has no timezone).
    """
    if not isinstance(value, datetime):
        raise TypeError(f"{field}: expected a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}: datetime must be timezone-aware (use timezone.utc)")
    ns = value.nanosecond if isinstance(value, NanoDatetime) else 0
    if isinstance(value, NanoDatetime) and value.tzinfo is UTC:
        return value
    utc = value.astimezone(UTC)
    return NanoDatetime(
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond,
        tzinfo=UTC,
        nanosecond=ns,
    )


def datetime_to_ns(value: datetime) -> int:
    """Nanoseconds since the Unix epoch of an aware ``datetime`` (exact)."""
    us = (value - _EPOCH) // _ONE_US
    return us * 1000 + (value.nanosecond if isinstance(value, NanoDatetime) else 0)


def datetime_from_ns(ns: int) -> NanoDatetime:
    """The UTC :class:`NanoDatetime` ``ns`` nanoseconds after the Unix epoch."""
    us, sub = divmod(int(ns), 1000)
    dt = _EPOCH + timedelta(microseconds=us)
    return NanoDatetime(
        dt.year,
        dt.month,
        dt.day,
        dt.hour,
        dt.minute,
        dt.second,
        dt.microsecond,
        tzinfo=UTC,
        nanosecond=sub,
    )


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


# What the server writes: UTC, "T", "Z". Read without the general pattern's
# time-zone handling, and the last values read are kept: an info response
# carries the same creation times call after call.
_SERVER_FORM = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")
_recent: dict[str, NanoDatetime] = {}
_RECENT_MAX = 512


def parse_rfc3339(text: str) -> NanoDatetime:
    """Parse an RFC 3339 timestamp (up to nanoseconds) into a UTC :class:`NanoDatetime`.

    Raises:
        ValueError: ``text`` is not an RFC 3339 timestamp.
    """
    if type(text) is str:
        value = _recent.get(text)
        if value is not None:
            return value
        m = _SERVER_FORM.fullmatch(text)
        if m is not None:
            return _remember(text, m.groups())
    return _parse_general(text)


def _remember(text: str, fields: tuple[str, ...]) -> NanoDatetime:
    """The value of a timestamp in the server's form, kept for the next time ``text`` comes."""
    year, month, day, hour, minute, second, fraction = fields
    us, sub = divmod(int(fraction.ljust(9, "0")) if fraction else 0, 1000)
    value = datetime.__new__(
        NanoDatetime, int(year), int(month), int(day), int(hour), int(minute), int(second), us, UTC
    )  # raises ValueError for a date that does not exist, as the general path does
    value._nanosecond = sub
    if len(_recent) >= _RECENT_MAX:
        _recent.clear()
    _recent[text] = value
    return value


def _parse_general(text: str) -> NanoDatetime:
    """:func:`parse_rfc3339` for any offset, separator and case."""
    m = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    frac = int((m.group(7) or "").ljust(9, "0"))
    us, sub = divmod(frac, 1000)
    if m.group(8):
        tz = UTC
    else:
        offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
        tz = timezone(-offset if m.group(9) == "-" else offset)
    dt = NanoDatetime(year, month, day, hour, minute, second, us, tzinfo=tz, nanosecond=sub)
    value = dt if tz is UTC else to_utc(dt)
    value._text = text
    return value


def wire_text(value: datetime) -> str:
    """The RFC 3339 text to send for ``value``: the text it was read from, if any.

    The server keeps the UTC offset another client wrote (nats.go sends a
    local ``time.Time``) and compares some configs strictly, offset included:
    a mirror whose ``opt_start_time`` came back in UTC reads as changed. So a
    value parsed from a non-UTC (or otherwise unusual) form is sent back as
    it came; any other value, or one derived from it, as
    :func:`format_rfc3339` writes it.
    """
    text = getattr(value, "_text", None)  # None too for a value built by _remember
    return text if text is not None else format_rfc3339(value)


def format_rfc3339(value: datetime, field: str = "value") -> str:
    """Format an aware ``datetime`` as Go's ``time.RFC3339Nano`` does, in UTC.

    Trailing zeros of the fraction are dropped, and so is an all-zero
    fraction: ``2026-11-22T04:04:35.1Z``, ``2026-11-22T04:04:35Z``.

    Raises:
        TypeError, ValueError: not an aware ``datetime`` (the text names ``field``).
    """
    v = to_utc(value, field)
    frac = v.microsecond * 1000 + v.nanosecond
    tail = f".{frac:09d}".rstrip("0") if frac else ""
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}{tail}Z"
    )


def seconds_to_ns(seconds: float | int, field: str = "value") -> int:
    """Convert seconds to integer nanoseconds, rounding to the nearest.

    A float is taken at its shortest decimal form (its ``repr``), so what was
    written is what is sent: ``31536000.001`` is ``31536000001000000`` ns,
    not the ``...0999998`` its binary value would give. Hence
    ``seconds_to_ns(ns_to_seconds(n)) == n`` for every ``n`` the server
    sends below 2**52 ns (52 days) and for every ``n`` whose seconds have
    at most 15 significant digits.

    Raises:
        TypeError: ``seconds`` is not an int or float.
        ValueError: ``seconds`` is NaN or infinite.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{field}: expected seconds as int or float, got {type(seconds).__name__}")
    if isinstance(seconds, int):
        return seconds * NS_PER_SECOND
    if type(seconds) is ExactSeconds:
        return seconds.ns
    if not math.isfinite(seconds):
        raise ValueError(f"{field}: must be a finite number of seconds, not {seconds!r}")
    return int((Decimal(repr(seconds)) * NS_PER_SECOND).to_integral_value(ROUND_HALF_EVEN))


class ExactSeconds(float):
    """Float seconds that also keep the integer nanoseconds they were read from.

    A float holds about 15 significant digits, so a duration of more than 52
    days given to the nanosecond (1 year and 1 ns, as nats.go can write it)
    has no float that converts back to it. :func:`ns_to_seconds` returns such
    a duration as this float, and :func:`seconds_to_ns` sends its
    :attr:`ns` back: updating a config from its info does not move it.
    Arithmetic gives a plain ``float``.

    Attributes:
        ns: the exact nanoseconds.
    """

    __slots__ = ("ns",)
    ns: int

    def __reduce__(self) -> tuple[Any, ...]:
        return (ns_to_seconds, (self.ns,))


# Below 2**52 ns, and at whole milliseconds below 10**21 ns (15 significant
# digits of seconds), seconds_to_ns(ns / 1e9) == ns: no exact copy is needed.
_FLOAT_EXACT_S = 2**52 / NS_PER_SECOND


def ns_to_seconds(ns: int) -> float:
    """Convert integer nanoseconds to float seconds (correctly rounded).

    A value the float cannot give back exactly is an :class:`ExactSeconds`.
    """
    seconds = ns / NS_PER_SECOND
    if -_FLOAT_EXACT_S < seconds < _FLOAT_EXACT_S:
        return seconds
    ns = int(ns)
    if ns % 1_000_000 == 0 and abs(ns) < 10**21 or seconds_to_ns(seconds) == ns:
        return seconds
    exact = ExactSeconds(seconds)
    exact.ns = ns
    return exact
