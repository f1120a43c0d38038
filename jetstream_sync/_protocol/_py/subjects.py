"""What a subject may hold (mirrors ``csrc/jss_subjects.c``)."""

from __future__ import annotations

import re

__all__ = ["valid_subject"]


_SUBJECT_BAD_BYTE = re.compile(rb"[ \t\n\v\f\r\x00]")


def valid_subject(subject: bytes, wildcards: bool) -> bool:
    """Tell whether ``subject`` is a valid subject.

    Args:
        subject: the subject bytes.
        wildcards: allow ``*`` tokens and a final ``>`` token (subscriptions).

    Returns:
        True for non-empty dot-separated non-empty tokens without ASCII
        whitespace (space, ``\\t \\n \\v \\f \\r``) or NUL, where ``*``/``>``
        tokens obey ``wildcards`` (``>`` only as the last token).
    """
    if type(subject) is not bytes:
        subject = bytes(subject)
    if not subject or _SUBJECT_BAD_BYTE.search(subject):
        return False
    tokens = subject.split(b".")
    if b"" in tokens:
        return False
    if wildcards:
        return b">" not in tokens[:-1]
    return b"*" not in tokens and b">" not in tokens
