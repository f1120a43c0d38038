"""Client-side checks that mirror the server's own rules for configs.

Every check raises ``ValueError`` whose message starts with the field name.
Checks are skipped while a class is being built from server JSON (see
:func:`lenient`): what the server returns is taken as it is, so a newer
server with relaxed rules never makes ``from_api`` fail.
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from .._subjects import is_filter_subject, is_publish_subject
from ..errors import BadSubjectError, LimitExceededError

MAX_NAME_LEN = 255  # JSMaxNameLen
MAX_DESCRIPTION_LEN = 4 * 1024  # JSMaxDescriptionLen (bytes)
MAX_METADATA_LEN = 128 * 1024  # JSMaxMetadataLen (bytes of keys + values)
MAX_REPLICAS = 5  # StreamMaxReplicas
MAX_SEQUENCE = 2**64 - 1  # the server's sequences and counts are uint64
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
MAX_UINT64 = 2**64 - 1

_LENIENT: ContextVar[bool] = ContextVar("jetstream_sync_lenient", default=False)

_BAD_NAME_CHARS = frozenset(" \t\n\v\f\r\x00.*>\\/")
_GROUP_NAME = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")
_SAMPLE_FREQ = re.compile(r"\d+%?")


@contextlib.contextmanager
def lenient() -> Iterator[None]:
    """Skip value checks in this thread while the block runs (server data)."""
    token = _LENIENT.set(True)
    try:
        yield
    finally:
        _LENIENT.reset(token)


def checking() -> bool:
    """Whether value checks apply now (not inside :func:`lenient`)."""
    return not _LENIENT.get()


Check = Callable[[Any, str], None]


def fail(field: str, message: str) -> None:
    raise ValueError(f"{field}: {message}")


def int_range(lo: int | None = None, hi: int | None = None) -> Check:
    """An integer in ``lo..hi`` (either end open when ``None``)."""

    def check(value: int, field: str) -> None:
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            lo_s = "" if lo is None else f">= {lo}"
            hi_s = "" if hi is None else f"<= {hi}"
            fail(field, f"must be {' and '.join(s for s in (lo_s, hi_s) if s)}, not {value}")

    return check


def sequence(value: int, field: str, minimum: int = 1, maximum: int = MAX_SEQUENCE) -> int:
    """A stream sequence (or count) given to a call: an int of at least ``minimum``.

    Returns it as a plain int. Raises ``TypeError`` for what is no int (a bool,
    a float, a str) and ``ValueError`` below ``minimum`` or past ``maximum`` (64
    bits; a count the server reads as an int64 passes :data:`MAX_INT64`), before
    anything is sent.
    """
    if isinstance(value, bool):
        raise TypeError(f"{field} must be an int, not bool")
    try:
        number = operator.index(value)  # int and int-likes (numpy), never float or str
    except TypeError:
        raise TypeError(f"{field} must be an int, not {type(value).__name__}") from None
    if number < minimum:
        raise ValueError(f"{field} must be at least {minimum}, not {number}")
    if number > maximum:
        bits = "64 bits" if maximum == MAX_SEQUENCE else "the server's int64"
        raise ValueError(f"{field} must be at most {maximum} ({bits}), not {number}")
    return number


def non_negative(value: float, field: str) -> None:
    if value < 0:
        fail(field, f"must not be negative, not {value}")


def asset_name(value: str, field: str) -> None:
    """A stream or consumer name: 1-255 bytes, none of whitespace, NUL, . * > \\ /.

    Raises:
        ValueError: empty, or a character the server refuses.
        LimitExceededError: longer than the server's 255 bytes (a ``ValueError``).
    """
    if not value:
        fail(field, "must not be empty")
    bad = sorted(_BAD_NAME_CHARS.intersection(value))
    if bad:
        fail(field, f"{value!r} must not contain {' '.join(repr(c) for c in bad)}")
    length = len(value.encode())
    if length > MAX_NAME_LEN:
        raise LimitExceededError(field, length, MAX_NAME_LEN, "the server's JSMaxNameLen")


def description(value: str, field: str) -> None:
    if len(value.encode()) > MAX_DESCRIPTION_LEN:
        fail(field, f"must be at most {MAX_DESCRIPTION_LEN} bytes")


def metadata(value: Mapping[str, str], field: str) -> None:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > MAX_METADATA_LEN:
        fail(field, f"keys and values must total at most {MAX_METADATA_LEN} bytes")


def subject(value: str, field: str) -> None:
    """A filter subject: ``*`` a whole token, ``>`` the last (see ``jetstream_sync._subjects``)."""
    if not is_filter_subject(value):
        raise BadSubjectError(
            f"{field}: {value!r} is not a valid subject ('*' must be a whole token, "
            "'>' the last token; no empty tokens, whitespace or NUL)"
        )


def literal_subject(value: str, field: str) -> None:
    """A subject messages are published to: no wildcard tokens."""
    subject(value, field)
    if not is_publish_subject(value):
        raise BadSubjectError(f"{field}: {value!r} must not contain wildcards")


def subjects(value: tuple[str, ...], field: str) -> None:
    for s in value:
        subject(s, field)
    if len(set(value)) != len(value):
        fail(field, "must not contain duplicates")


def not_empty(value: str, field: str) -> None:
    if not value:
        fail(field, "must not be empty")


def group_names(value: tuple[str, ...], field: str) -> None:
    for group in value:
        if not _GROUP_NAME.fullmatch(group):
            fail(field, f"{group!r} must be 1-16 characters of a-z A-Z 0-9 / _ = -")


def sample_freq(value: str, field: str) -> None:
    if not _SAMPLE_FREQ.fullmatch(value):
        fail(field, f"{value!r} must be a percentage such as '50' or '50%'")


def min_duration(minimum: float, what: str) -> Check:
    """Zero (the server default), or at least ``minimum`` seconds."""

    def check(value: float, field: str) -> None:
        non_negative(value, field)
        if 0 < value < minimum:
            fail(field, f"must be 0 or at least {what}, not {value}")

    return check


def each(check: Check) -> Check:
    """Apply ``check`` to every item of a sequence."""

    def check_each(value: Any, field: str) -> None:
        for item in value:
            check(item, field)

    return check_each


def optional(check: Check) -> Check:
    """Apply ``check`` unless the value is empty (the server's "not set")."""

    def check_if_set(value: Any, field: str) -> None:
        if value:
            check(value, field)

    return check_if_set
