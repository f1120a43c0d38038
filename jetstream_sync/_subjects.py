"""Subjects by role: the two rules, the name-token rule, and API subjects.

A subject someone publishes *to* has no wildcards (:func:`publish_subject`);
a subject someone *filters or subscribes on* may hold ``*`` as a whole token
anywhere and ``>`` as the last token (:func:`filter_subject`). Both rules
share the token rule: a subject is non-empty dot-separated tokens, each
non-empty and free of ASCII whitespace (space, ``\\t \\n \\v \\f \\r``) and
NUL. ``*`` or ``>`` inside a longer token (``a*b``) is an ordinary character.
A name that becomes one token of a subject (a stream, a consumer, a queue
group) is a single token without wildcards (:func:`name_token`).

Each user-supplied subject is checked once, by the rule of its role, where it
enters the library. Subjects the library assembles from checked parts are
:class:`ApiSubject` values, which the client sends without the publish check:
``$JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>`` legitimately ends
in a filter that may hold wildcards.

The rule itself is implemented once per protocol core (``jss_valid_subject``
in C, ``valid_subject`` in the Python twin); this module only chooses the
role and raises :class:`~jetstream_sync.errors.BadSubjectError`.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import _protocol
from .errors import BadSubjectError, LimitExceededError

__all__ = [
    "ApiSubject",
    "check_control_line",
    "filter_covers",
    "filter_subject",
    "filter_subjects",
    "is_filter_subject",
    "is_name_token",
    "is_publish_subject",
    "name_token",
    "publish_subject",
]


def _encode(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise BadSubjectError(f"{what} must be a str, not {type(value).__name__}")
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise BadSubjectError(f"{what} is not encodable as UTF-8: {value!r}") from None


def _valid(subject: object, wildcards: bool) -> bool:
    try:
        return _protocol.valid_subject(_encode(subject, "subject"), wildcards)
    except BadSubjectError:
        return False


def is_publish_subject(subject: str) -> bool:
    """Whether ``subject`` is valid to publish to (no wildcard tokens)."""
    return _valid(subject, False)


def is_filter_subject(subject: str) -> bool:
    """Whether ``subject`` is valid to filter or subscribe on (``*`` tokens, ``>`` last)."""
    return _valid(subject, True)


def subject_matches(subject: str, pattern: str) -> bool:
    """Whether the literal ``subject`` is one the filter ``pattern`` matches (both checked)."""
    tokens, wanted = subject.split("."), pattern.split(".")
    for i, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > i
        if i >= len(tokens) or (token != "*" and token != tokens[i]):
            return False
    return len(tokens) == len(wanted)


def filter_covers(wide: str, narrow: str) -> bool:
    """Whether the filter ``wide`` matches every subject the filter ``narrow`` matches
    (both checked; nats-server's subset match)."""
    tokens, wanted = narrow.split("."), wide.split(".")
    for i, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > i
        if i >= len(tokens) or tokens[i] == ">" or (token != "*" and token != tokens[i]):
            return False
    return len(tokens) == len(wanted)


def is_name_token(name: str) -> bool:
    """Whether ``name`` is one valid subject token without wildcards (no ``.``)."""
    return is_publish_subject(name) and "." not in name


def publish_subject(subject: str, what: str = "subject") -> bytes:
    """Check a subject to publish to; return its bytes.

    Args:
        subject: the subject.
        what: how error messages name it (``"reply subject"``...).

    Raises:
        BadSubjectError: not a str, empty, an empty token, whitespace or NUL,
            or a ``*``/``>`` token; the message names which.
    """
    raw = _encode(subject, what)
    if not _protocol.valid_subject(raw, False):
        raise BadSubjectError(f"invalid {what} ({_publish_problem(raw)}): {subject!r}")
    return raw


_WHITESPACE_NAMES = {
    " ": "a space",
    "\t": "a tab",
    "\n": "a newline",
    "\v": "a vertical tab",
    "\f": "a form feed",
    "\r": "a carriage return",
}


def _token_problem(text: str) -> str | None:
    """What breaks the token rule both roles share (empty, whitespace, NUL), or None."""
    if not text:
        return "it is empty"
    for char, name in _WHITESPACE_NAMES.items():
        if char in text:
            return f"it contains {name}; subjects take no whitespace"
    if "\0" in text:
        return "it contains a NUL byte"
    if "" in text.split("."):
        return "it has an empty token: a '.' at the start or the end, or '..'"
    return None


def _publish_problem(raw: bytes) -> str:
    """What makes ``raw`` (already found invalid) unfit to publish to, in a few words."""
    text = raw.decode("utf-8", "surrogateescape")
    problem = _token_problem(text)
    if problem is not None:
        return problem
    wildcard = next((t for t in text.split(".") if t in ("*", ">")), "")
    return f"publish subjects take no wildcards, and {wildcard!r} is one"


def _filter_problem(raw: bytes) -> str:
    """What makes ``raw`` (already found invalid) unfit to filter or subscribe on."""
    problem = _token_problem(raw.decode("utf-8", "surrogateescape"))
    return problem or "'>' may only be the last token"


def filter_subject(subject: str, what: str = "filter subject") -> str:
    """Check a subject to filter or subscribe on; return it.

    Raises:
        BadSubjectError: not a str, empty, an empty token, whitespace or NUL,
            or a ``>`` token that is not the last.
    """
    raw = _encode(subject, what)
    if not _protocol.valid_subject(raw, True):
        raise BadSubjectError(f"invalid {what} ({_filter_problem(raw)}): {subject!r}")
    return subject


def filter_subjects(subjects: Iterable[str], what: str = "filter subject") -> list[str]:
    """Check each of several filter subjects; return them as a list.

    Raises:
        BadSubjectError: one of them fails :func:`filter_subject`, or a bare
            ``str`` was given where a sequence of subjects is expected.
    """
    if isinstance(subjects, (str, bytes)):
        raise BadSubjectError(f"{what}s must be a sequence of subjects, not one string")
    return [filter_subject(s, what) for s in subjects]


def name_token(name: str, what: str = "name") -> str:
    """Check a name that becomes one token of a subject; return it.

    Raises:
        BadSubjectError: not a str, empty, holds ``.``, whitespace or NUL, or
            is ``*`` or ``>``.
    """
    if not is_name_token(name):
        if not isinstance(name, str):
            raise BadSubjectError(f"{what} must be a str, not {type(name).__name__}")
        raise BadSubjectError(f"invalid {what} (one subject token, no wildcards): {name!r}")
    return name


def check_control_line(argument: str, length: int, overhead: int, limit: int) -> None:
    """Refuse an argument that would make a protocol control line longer than ``limit``.

    The server drops a connection whose control line (``PUB <subject> <reply>
    <size>``, ``SUB ...``) passes its ``max_control_line``; every thread sharing
    that connection would lose its call. Checking first costs one comparison.

    Args:
        argument: how the error names the argument (``"key"``, ``"object name"``).
        length: the argument's length in bytes.
        overhead: the bytes the rest of the line adds (op, other fields, CRLF).
        limit: the server's ``max_control_line`` (:attr:`Client.max_control_line`).

    Raises:
        LimitExceededError: ``length + overhead`` is over ``limit``.
    """
    if length + overhead > limit:
        line = length + overhead
        raise LimitExceededError(
            argument, length, limit, f"the protocol line it makes would be {line} bytes"
        )


class ApiSubject(str):
    """A subject assembled from parts already checked by their roles.

    The client sends it as it is, without the publish check: its last part
    may be a filter with wildcards, which the server reads from the tail.
    Only the code that checks those parts makes these (the JetStream API
    helper, ``jetstream_sync.jetstream._api.JsApi.subject``).
    """

    __slots__ = ()
