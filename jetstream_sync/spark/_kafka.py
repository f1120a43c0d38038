"""Kafka's source options on a stream: offsets as JSON, timestamps in ms, trigger delays.

Kafka names a position per topic partition; a JetStream stream has one
sequence, so ``{"ORDERS": 42}`` is ``42`` when the read's stream is
``ORDERS``. As in Kafka's JSON, ``-2`` means earliest and ``-1`` latest.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

EARLIEST = "earliest"
LATEST = "latest"
_JSON_EARLIEST = -2
_JSON_LATEST = -1
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_offset(value: str, option: str, stream: str) -> str | int:
    """``earliest``, ``latest`` or a sequence from a Kafka-style offset option.

    Args:
        value: ``earliest``, ``latest``, a sequence number, or JSON naming
            the stream (``{"ORDERS": 42}``; ``-2`` earliest, ``-1`` latest).
        option: the option's name, for errors.
        stream: the read's stream, the only key the JSON may have.

    Raises:
        ValueError: none of those, or JSON about another stream.
    """
    text = value.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    if _is_number(text):
        return int(text)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"option {option!r} must be earliest, latest, a sequence number or JSON "
            f'{{"{stream}": <sequence>}}, got {value!r}'
        )
    if set(parsed) != {stream}:
        raise ValueError(
            f"option {option!r} must name the stream {stream!r} and only it, got {value!r}"
        )
    seq = parsed[stream]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < _JSON_EARLIEST:
        raise ValueError(f"option {option!r}: {seq!r} is not a sequence, -2 or -1")
    if seq == _JSON_EARLIEST:
        return EARLIEST
    if seq == _JSON_LATEST:
        return LATEST
    return seq


def parse_millis(value: str, option: str) -> datetime:
    """A UTC time from milliseconds since the epoch (Kafka's ``startingTimestamp``).

    Raises:
        ValueError: not a non-negative integer.
    """
    text = value.strip()
    if _is_number(text):
        try:
            return datetime.fromtimestamp(int(text) / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):  # past what a datetime holds
            pass
    raise ValueError(
        f"option {option!r} must be milliseconds since the epoch (up to year 9999), got {value!r}"
    )


def _is_number(text: str) -> bool:
    """Whether ``text`` is a non-negative integer in ASCII digits (``str.isdigit`` takes ``²``)."""
    return text.isascii() and text.isdigit()


def parse_duration(value: str, option: str) -> float:
    """Seconds from a Spark duration (``15m``, ``30s``, ``500ms``, ``1h``; no unit: ms).

    Raises:
        ValueError: not a duration.
    """
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"option {option!r} must be a duration such as 15m or 30s, got {value!r}")
    number, unit = match.groups()
    return int(number) * _SECONDS[unit or "ms"]
