"""Re-exports :mod:`jetstream_sync._timefmt`, moved to the core (``Msg.metadata`` needs it)."""

from .._timefmt import (
    GO_ZERO_TIME,
    NanoDatetime,
    datetime_from_ns,
    datetime_to_ns,
    format_rfc3339,
    ns_to_seconds,
    parse_rfc3339,
    seconds_to_ns,
    to_utc,
)

__all__ = [
    "GO_ZERO_TIME",
    "NanoDatetime",
    "datetime_from_ns",
    "datetime_to_ns",
    "format_rfc3339",
    "ns_to_seconds",
    "parse_rfc3339",
    "seconds_to_ns",
    "to_utc",
]
