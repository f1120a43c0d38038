"""Subject filters as sets of subjects: intersecting two, narrowing a prefix to a filter."""

from __future__ import annotations

from collections.abc import Iterable

from .._seam import is_filter_subject, is_publish_subject
from ..errors import BadSubjectError


def check_filter(subject: str, option: str) -> str:
    """A filter subject (``*`` and a final ``>`` allowed), checked.

    Raises:
        BadSubjectError: not a valid filter subject.
    """
    if not is_filter_subject(subject):
        raise BadSubjectError(f"option {option!r}: {subject!r} is not a valid subject filter")
    return subject


def is_literal(subject: str) -> bool:
    """Whether ``subject`` is a valid subject without wildcards (one a message can have)."""
    return is_publish_subject(subject)


def intersect(a: str | None, b: str | None) -> tuple[bool, str | None]:
    """The filter matching exactly the subjects both ``a`` and ``b`` match.

    ``None`` stands for "every subject".

    Returns:
        ``(possible, filter)``: ``possible`` is False when no subject matches both.
    """
    if a is None or b is None:
        return True, a if b is None else b
    ta, tb = a.split("."), b.split(".")
    out: list[str] = []
    for i in range(max(len(ta), len(tb)) + 1):
        x = ta[i] if i < len(ta) else None
        y = tb[i] if i < len(tb) else None
        if x is None and y is None:
            return True, ".".join(out)
        if x == ">" or y == ">":
            rest = tb[i:] if x == ">" else ta[i:]
            if not rest:
                return False, None  # '>' needs at least one more token
            return True, ".".join(out + rest)
        if x is None or y is None:
            return False, None
        if x == "*":
            out.append(y)
        elif y == "*" or x == y:
            out.append(x)
        else:
            return False, None
    return True, ".".join(out)  # not reached: the loop returns


def captures(filters: Iterable[str], subject: str) -> bool:
    """Whether a message published to ``subject`` matches one of ``filters`` (a stream's)."""
    return any(intersect(subject, f)[0] for f in filters)


def prefix_filter(prefix: str) -> tuple[str | None, bool]:
    """A server-side filter covering every subject that starts with ``prefix``.

    Returns:
        ``(filter, exact)``: ``filter`` is None when no filter narrows the
        prefix; ``exact`` is True when the filter matches exactly the
        subjects with that prefix (the prefix ends at a token boundary).
    """
    tokens = prefix.split(".")
    whole = tokens[:-1]
    if not whole or any(t in ("", "*", ">") for t in whole):
        return None, False
    head = ".".join(whole)
    if not is_literal(head):
        return None, False
    return head + ".>", tokens[-1] == ""
