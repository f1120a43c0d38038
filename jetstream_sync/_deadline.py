"""Timeout, count and callback validation, and the one-deadline-per-call helper."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from time import monotonic
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

#: The longest timeout or duration, in seconds (about 292 years): the wire carries
#: durations as int64 nanoseconds, and Python's waits take no longer one either.
MAX_SECONDS = (2**63 - 1) // 10**9

# Blocking waits are cut into slices of at most this many seconds so that a
# Ctrl-C or a close() from another thread is noticed promptly.
WAIT_SLICE = 0.5


def check_timeout(name: str, value: float | None, default: float | None = None) -> float:
    """Return ``value`` (or ``default`` when ``value`` is None) as a positive float.

    Raises:
        ValueError: the value is NaN, infinite, zero or negative (the message names it).
        TypeError: the value is not a number.
    """
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)):  # noqa: UP038 - faster
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return check_at_most_max(name, value)


def check_at_most_max(name: str, value: float) -> float:
    """Return ``value`` unless it is more than :data:`MAX_SECONDS`.

    Raises:
        ValueError: more than :data:`MAX_SECONDS` (the message names ``name``).
    """
    if value > MAX_SECONDS:
        raise ValueError(
            f"{name} must be at most {MAX_SECONDS} seconds (about 292 years), got {value!r}"
        )
    return value


def seconds_text(value: float) -> str:
    """``value`` seconds as an error text shows them: to the millisecond, no float noise.

    ``2.9999965410002005`` reads ``3``, ``0.25`` reads ``0.25``.
    """
    return f"{round(value, 3) or value:g}"


class Deadline:
    """A point in monotonic time by which a call must finish.

    Attributes:
        end: that point (``time.monotonic()``).
        timeout: the seconds it was made with: what an error names, not what is
            left when the error is raised or a retried request begins.
    """

    __slots__ = ("end", "timeout")

    def __init__(self, timeout: float) -> None:
        self.end = monotonic() + timeout
        self.timeout = timeout

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        left = self.end - monotonic()
        return left if left > 0 else 0.0

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return monotonic() >= self.end

    def slice(self) -> float:
        """The next wait: the time left, capped at :data:`WAIT_SLICE`."""
        left = self.end - monotonic()
        if left <= 0:
            return 0.0
        return left if left < WAIT_SLICE else WAIT_SLICE


def check_count(name: str, value: int, minimum: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) of at least ``minimum``.

    Raises:
        TypeError: not an int.
        ValueError: below ``minimum`` (the message names the parameter).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return value


def check_callback(name: str, value: _F) -> _F:
    """Return ``value`` if the client can call it on one of its threads.

    Raises:
        TypeError: not callable, or an ``async def`` function (calling it only
            makes a coroutine that nothing would await).
    """
    if not callable(value):
        raise TypeError(f"{name} must be callable, not {type(value).__name__}")
    if inspect.iscoroutinefunction(value):
        raise TypeError(
            f"{name} must be a plain function: the client calls it on a thread and "
            "would never await the coroutine of an async def"
        )
    return value


def check_seconds(name: str, value: float) -> float:
    """Return ``value`` as a float if it is a finite number of seconds >= 0 (0 allowed).

    Raises:
        TypeError: not a number.
        ValueError: NaN, infinite or negative.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):  # noqa: UP038 - as above
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return check_at_most_max(name, float(value))
