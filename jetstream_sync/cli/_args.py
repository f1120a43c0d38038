"""Argument value parsers shared by the commands: durations, sizes, headers, times.

Each is an ``argparse`` ``type=`` callable: bad input raises
``argparse.ArgumentTypeError``, which argparse turns into a usage error (exit 2).
Options that several commands take the same way are added here too.
"""

from __future__ import annotations

import argparse
import math
import re
from datetime import UTC, datetime, timedelta

from ..jetstream.enums import StorageType

STORAGE = {"file": StorageType.FILE, "memory": StorageType.MEMORY}
"""``--storage`` choices and the storage type each names."""

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w|y)")
_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([kmgt]?)(i?b?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MAX_DURATION = (2**63 - 1) // 10**9
"""The longest duration, in whole seconds (about 292 years): the wire carries durations as
int64 nanoseconds, and no wait (connect, request, pull) takes a longer timeout."""


def _seconds(text: str) -> float:
    """Seconds from ``"90"``, ``"1.5"``, ``"500ms"``, ``"10m"``, ``"1h30m"``, ``"7d"``.

    A bare number is seconds. Units: ns, us, ms, s, m, h, d, w, y.

    Raises:
        argparse.ArgumentTypeError: not a duration, not a number (NaN), infinite,
            or negative.
    """
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(a + b for a, b in parts) != text:
            raise argparse.ArgumentTypeError(
                f"invalid duration {text!r} (examples: 30, 1.5s, 500ms, 10m, 1h30m, 7d)"
            ) from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if math.isnan(seconds):
        raise argparse.ArgumentTypeError(f"a duration must be a number, got {text!r}")
    if math.isinf(seconds):
        raise argparse.ArgumentTypeError(f"a duration must be finite, got {text!r}")
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"a duration must not be negative, got {text!r}")
    return seconds


def duration(text: str) -> float:
    """Like :func:`_seconds`, but at most :data:`MAX_DURATION` (a wire duration, a timeout).

    Raises:
        argparse.ArgumentTypeError: as :func:`_seconds`, or longer than
            :data:`MAX_DURATION` (about 292 years).
    """
    seconds = _seconds(text)
    if seconds > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"a duration must be at most 292 years, got {text!r}")
    return seconds


def positive_duration(text: str) -> float:
    """Like :func:`duration`, but it must be more than zero (a timeout)."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero, got {text!r}")
    return seconds


def size(text: str) -> int:
    """Bytes from ``"512"``, ``"64KB"``, ``"1MiB"``, ``"2g"`` (binary multiples).

    Raises:
        argparse.ArgumentTypeError: not a size, or too large to be one.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 512, 64KB, 1MiB)")
    value = float(match[1]) * _SIZE_UNITS[match[2].lower()]
    if math.isinf(value):
        raise argparse.ArgumentTypeError(f"size {text!r} is too large")
    return int(value)


def count(text: str) -> int:
    """A whole number >= 1.

    Raises:
        argparse.ArgumentTypeError: not an integer, or less than 1.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def limit(text: str) -> int:
    """A limit: a whole number >= -1 (-1 means unlimited, as on the wire).

    Raises:
        argparse.ArgumentTypeError: not an integer, or less than -1.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (unlimited) or more, got {value}")
    return value


def header(text: str) -> tuple[str, str]:
    """``"K:V"`` -> ``("K", "V")`` (the value may contain colons; spaces around are kept off).

    Raises:
        argparse.ArgumentTypeError: no colon, or an empty key.
    """
    key, colon, value = text.partition(":")
    if not colon or not key.strip():
        raise argparse.ArgumentTypeError(f"a header is KEY:VALUE, got {text!r}")
    return key.strip(), value.strip()


def until(text: str) -> datetime:
    """A moment: an ISO 8601 time (naive means UTC), or a duration from now (``"10m"``).

    Raises:
        argparse.ArgumentTypeError: neither a time nor a duration, or a duration
            that ends after the year 9999.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            return datetime.now(UTC) + timedelta(seconds=_seconds(text))
        except OverflowError:
            raise argparse.ArgumentTypeError(f"{text!r} from now is past the year 9999") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def subject_list(text: str) -> str:
    """One ``--subjects`` value (``"a,b"``), refused when it names no subject (``""``, ``","``).

    Raises:
        argparse.ArgumentTypeError: no subject in ``text``.
    """
    if not any(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r} names no subject")
    return text


def subjects(values: list[str] | None) -> list[str]:
    """Flatten ``--subjects a,b --subjects c`` into ``["a", "b", "c"]``."""
    return [s.strip() for v in values or () for s in v.split(",") if s.strip()]


def size_limit(text: str) -> int:
    """A byte limit: a size (``"1GiB"``) or -1 for unlimited."""
    return -1 if text.strip() == "-1" else size(text)


def add_force_flag(parser: argparse.ArgumentParser, verb: str = "rm") -> None:
    """Add ``-f/--force``, taken only so ``nats`` CLI scripts run: ``verb`` never prompts."""
    parser.add_argument(
        "-f",
        "--force",
        action="store_true",
        help=f"accepted for nats CLI scripts: {verb} never prompts",
    )


def add_defaults_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--defaults``, taken only so ``nats`` CLI scripts run (unset fields are defaults)."""
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="accepted for nats CLI scripts: unset fields always take the defaults",
    )
