"""Schedule patterns checked by the rules nats-server applies to ``Nats-Schedule``.

The server (2.14+) takes ``@at <RFC 3339>``, ``@every <Go duration>`` (at least
1 s), a predefined name (``@hourly``...) or six cron fields, seconds first. A
cron field is a comma-separated list of items ``*``, ``?``, ``N``, ``N-M``,
each optionally ``/step`` (``N/step`` means ``N`` to the field's maximum);
numbers are Go ``Atoi`` numbers (an optional ``+``), months and weekdays may
be named (``jan``, ``sun``). A spec that never fires within five years (30
February) is refused too. This module refuses exactly those.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["AT", "EVERY", "PREDEFINED", "check_pattern", "go_duration_seconds"]

AT = "@at "
EVERY = "@every "
PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_DAYS = "sun mon tue wed thu fri sat".split()
# (name, lowest, highest, names) of the six fields, in order.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("seconds", 0, 59, {}),
    ("minutes", 0, 59, {}),
    ("hours", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {name: i + 1 for i, name in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {name: i for i, name in enumerate(_DAYS)}),
)
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64_MAX = (1 << 63) - 1
# Go's time.ParseDuration: a signed sequence of decimal numbers, each with a unit.
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9,
            "m": 60 * 10**9, "h": 3600 * 10**9}  # fmt: skip
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))"
)
_EPOCH_DAY = date(1970, 1, 1).toordinal()
# The server looks for the next firing up to the end of the fifth year from now.
_SEARCH_YEARS = 5


def _atoi(text: str, what: str) -> int:
    """A non-negative number as Go's ``strconv.Atoi`` reads it (``+`` allowed)."""
    if not _ATOI.fullmatch(text) or abs(int(text)) > _INT64_MAX:
        raise ValueError(f"cron {what}: {text!r} is not a number")
    value = int(text)
    if value < 0:
        raise ValueError(f"cron {what}: {text!r} is negative")
    return value


def _number(text: str, what: str, names: dict[str, int]) -> int:
    """A month or weekday name of the field, else a number."""
    named = names.get(text.lower())
    return named if named is not None else _atoi(text, what)


def _field_bits(text: str, index: int) -> tuple[set[int], bool]:
    """The values one cron field allows, and whether it holds a ``*``/``?`` without a step."""
    what, low, high, names = _FIELDS[index]
    values: set[int] = set()
    star = False
    for item in (part for part in text.split(",") if part):  # empty items are skipped
        range_step = item.split("/")
        low_high = range_step[0].split("-")
        item_star = low_high[0] in ("*", "?")  # anything after "*-" is ignored
        if item_star:
            start, end = low, high
        elif len(low_high) > 2:
            raise ValueError(f"cron {what}: too many hyphens in {item!r}")
        else:
            start = end = _number(low_high[0], what, names)
            if len(low_high) == 2:
                end = _number(low_high[1], what, names)
        step = 1
        if len(range_step) == 2:
            step = _atoi(range_step[1], what)
            if len(low_high) == 1:
                end = high  # "N/step" runs to the field's maximum
            if step > 1:
                item_star = False
        elif len(range_step) > 2:
            raise ValueError(f"cron {what}: too many slashes in {item!r}")
        if start < low or end > high:
            raise ValueError(f"cron {what}: {item!r} is outside {low}-{high}")
        if start > end:
            raise ValueError(f"cron {what}: range {item!r} is reversed")
        if step == 0:
            raise ValueError(f"cron {what}: the step of {item!r} is 0")
        values.update(range(start, end + 1, step))
        star = star or item_star
    return values, star


def _fires(fields: list[tuple[set[int], bool]], today: date) -> bool:
    """Whether a day within the server's search (to the end of year + 5) matches."""
    (seconds, _), (minutes, _), (hours, _), (dom, dom_star), (months, _), (dow, dow_star) = fields
    if not (seconds and minutes and hours and months):
        return False
    day, last = today, date(today.year + _SEARCH_YEARS, 12, 31)
    while day <= last:
        if day.month in months:
            dom_ok, dow_ok = day.day in dom, (day.isoweekday() % 7) in dow
            if (dom_ok and dow_ok) if (dom_star or dow_star) else (dom_ok or dow_ok):
                return True
        day += timedelta(days=1)
    return False


def _check_cron_fields(text: str, today: date) -> None:
    fields = text.split()
    if len(fields) != 6:
        raise ValueError(
            "cron needs 6 fields (seconds minutes hours day-of-month month day-of-week), "
            f"got {len(fields)}: {text!r}"
        )
    parsed = [_field_bits(field, index) for index, field in enumerate(fields)]
    if not _fires(parsed, today):
        raise ValueError(f"cron {text!r} never fires (within the server's five-year search)")


def go_duration_seconds(text: str) -> float:
    """Seconds in a Go duration (``1h30m``, ``1.5s``, ``500ms``), as ``time.ParseDuration``.

    Raises:
        ValueError: not a Go duration.
    """
    rest, sign = text, 1
    if rest[:1] in ("+", "-"):
        sign, rest = (-1 if rest[0] == "-" else 1), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"{text!r} is not a duration")
    total, pos = 0, 0
    while pos < len(rest):
        m = _DURATION_PART.match(rest, pos)
        if m is None or not (m.group(1) or m.group(2)):
            raise ValueError(f"{text!r} is not a duration (such as 90s, 1m30s or 1.5h)")
        whole, fraction, unit = m.group(1) or "0", m.group(2) or "", m.group(3)
        scale = _UNIT_NS[unit]
        total += int(whole) * scale + (
            int(fraction) * scale // 10 ** len(fraction) if fraction else 0
        )
        pos = m.end()
    if total > _INT64_MAX:
        raise ValueError(f"{text!r} is longer than a Go duration holds")
    return sign * total / 1e9


def _check_at(text: str) -> None:
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"@at needs an RFC 3339 time (2030-01-31T12:00:00Z), got {text!r}")
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = m.groups()
    try:
        day_number = date(int(year), int(month), int(day)).toordinal() - _EPOCH_DAY
    except ValueError:
        raise ValueError(f"@at: {text!r} is not a date") from None
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        raise ValueError(f"@at: {text!r} is not a time of day")
    offset = 0
    if sign is not None:
        if int(off_h) > 23 or int(off_m) > 59:
            raise ValueError(f"@at: {text!r} has an offset out of range")
        offset = (int(off_h) * 3600 + int(off_m) * 60) * (-1 if sign == "-" else 1)
    seconds = day_number * 86400 + int(hour) * 3600 + int(minute) * 60 + int(second) - offset
    ns = seconds * 10**9 + int((fraction or "")[:9].ljust(9, "0"))
    # The server keeps the time as Go's UnixNano(), undefined outside int64: a time after
    # 2262 fired at once in nats-server 2.15.1, one before 1678 never fired.
    if not -(2**63) <= ns <= _INT64_MAX:
        raise ValueError(
            f"@at: {text!r} is not between 1678 and 2262 (the server keeps the time as "
            "int64 nanoseconds since 1970)"
        )


def check_pattern(pattern: str, today: date | None = None) -> str:
    """Check a ``Nats-Schedule`` pattern by the server's rules; return the text to send.

    Whitespace is normalised (single spaces, none around), and a predefined
    name is lower-cased (the server matches ``@hourly``... exactly).

    Args:
        pattern: ``@at ...``, ``@every ...``, ``@hourly``..., or six cron fields.
        today: the day the five-year search starts (default: today, UTC).

    Raises:
        ValueError: the server would refuse it (10189, invalid schedule).
        TypeError: ``pattern`` is not a ``str``.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"cron must be a str, got {type(pattern).__name__}")
    text = " ".join(pattern.split())
    if text.lower() in PREDEFINED:
        return text.lower()
    if text.startswith(AT):
        _check_at(text[len(AT) :])
    elif text.startswith(EVERY):
        if go_duration_seconds(text[len(EVERY) :]) < 1:
            raise ValueError(f"{text!r}: the interval must be at least 1 second")
    elif text.startswith("@"):
        raise ValueError(f"cron: unknown predefined schedule {text!r}")
    else:
        _check_cron_fields(text, today or datetime.now(UTC).date())
    return text
