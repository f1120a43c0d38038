"""Stream and consumer names, checked before they go into an API subject."""

from __future__ import annotations

from ._checks import asset_name

__all__ = ["check_consumer_name", "check_stream_name"]


def check_stream_name(name: str) -> str:
    """Validate a stream name before it goes into a subject.

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, or holds whitespace, ``.``, ``*``, ``>``, ``/`` or ``\\``.
    """
    if not isinstance(name, str):
        raise TypeError(f"stream name must be a str, not {type(name).__name__}")
    asset_name(name, "stream name")
    return name


def check_consumer_name(name: str) -> str:
    """Validate a consumer name before it goes into a subject.

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, or holds whitespace, ``.``, ``*``, ``>``, ``/`` or ``\\``.
    """
    if not isinstance(name, str):
        raise TypeError(f"consumer name must be a str, not {type(name).__name__}")
    asset_name(name, "consumer name")
    return name
