"""Bucket names, keys and key filters: checked once, where they enter (ADR-8).

Two rules for keys. What this client writes (``put``, ``create``,
``update``) follows ADR-8 strictly (:func:`check_key`). What it reads or
removes (``get``, ``history``, ``delete``, ``purge``, watch filters) may
have been written by any client, so any literal subject tail is accepted
(:func:`check_stored_key`): a bucket's handle can read and delete every key
its ``keys()`` lists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._seam import filter_covers
from ..errors import InvalidBucketNameError, InvalidKeyError, LimitExceededError
from ..jetstream._seam import checks as ck

STREAM_PREFIX = "KV_"
_MAX_BUCKET_LEN = ck.MAX_NAME_LEN - len(STREAM_PREFIX)
_BUCKET = re.compile(r"[a-zA-Z0-9_-]+")
_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")
# What no subject token may hold: ASCII space and control characters.
_NOT_IN_SUBJECT = re.compile(r"[\x00-\x20\x7f]")


def check_bucket(bucket: str) -> str:
    """Return ``bucket`` if it is a valid bucket name.

    Raises:
        InvalidBucketNameError: empty, not a ``str``, or a character outside
            ``a-z A-Z 0-9 _ -`` (also a ``ValueError``).
        LimitExceededError: longer than its stream's name may be (252 bytes).
    """
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        raise InvalidBucketNameError(f"invalid bucket name {bucket!r}: use a-z A-Z 0-9 _ -")
    if len(bucket) > _MAX_BUCKET_LEN:
        raise LimitExceededError(
            "bucket", len(bucket), _MAX_BUCKET_LEN,
            f"its stream's name, {STREAM_PREFIX}<bucket>, takes at most the server's "
            f"{ck.MAX_NAME_LEN} bytes",
        )  # fmt: skip
    return bucket


def is_new_key(key: object) -> bool:
    """Whether this client may write ``key`` (see :func:`check_key`)."""
    return (
        isinstance(key, str)
        and _KEY.fullmatch(key) is not None
        and key[0] != "."
        and key[-1] != "."
        and ".." not in key
    )


def check_key(key: str) -> str:
    """Return ``key`` if this client may write it (ADR-8's key rule, no wildcards).

    Raises:
        InvalidKeyError: empty, not a ``str``, a character outside
            ``-/_=.a-zA-Z0-9``, a leading or trailing dot, or an empty token.
    """
    if not is_new_key(key):
        raise InvalidKeyError(f"invalid key {key!r}: use -/_=.a-zA-Z0-9 in non-empty tokens")
    return key


def _subject_tokens(key: object) -> list[str] | None:
    """The tokens of ``key`` as a subject tail, or None when it cannot be one."""
    if not isinstance(key, str) or not key or _NOT_IN_SUBJECT.search(key):
        return None
    tokens = key.split(".")
    # A * or > beside other characters (a*b) is literal to the server, as any other.
    return None if "" in tokens else tokens


def check_stored_key(key: str) -> str:
    """Return ``key`` if another client could have stored it: a literal subject tail.

    Any characters but space and control characters, in non-empty
    dot-separated tokens none of which is ``*`` or ``>`` (inside a longer
    token, as in ``a*b``, they are ordinary characters); non-UTF-8
    bytes of a key read from the server (kept as surrogate escapes) included.

    Raises:
        InvalidKeyError: not such a key.
    """
    tokens = _subject_tokens(key)
    if tokens is None or "*" in tokens or ">" in tokens:
        raise InvalidKeyError(f"invalid key {key!r}: not a literal subject tail")
    return key


def is_utf8(key: str) -> bool:
    """Whether ``key`` holds no byte that was not UTF-8 (kept as a surrogate escape)."""
    if key.isascii():
        return True
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_filter(key: str) -> str:
    """Return ``key`` if it is a valid key filter: stored keys' tokens (see
    :func:`check_stored_key`), ``*`` for one whole token, and ``>`` as the last token.

    A filter goes to the server in a consumer's JSON config, which the server
    reads as UTF-8 (a byte that is not becomes U+FFFD), so a key holding such
    bytes cannot be filtered on.

    Raises:
        InvalidKeyError: not a valid filter, or not UTF-8.
    """
    tokens = _subject_tokens(key)
    if tokens is None or ">" in tokens[:-1]:
        raise InvalidKeyError(f"invalid key filter {key!r}")
    if not is_utf8(key):
        raise InvalidKeyError(
            f"invalid key filter {key!r}: not UTF-8, which the server needs to filter on it"
        )
    return key


def _is_wildcard(key: str) -> bool:
    tokens = key.split(".")
    return "*" in tokens or ">" in tokens


def distinct_filters(filters: Sequence[str]) -> list[str]:
    """``filters`` (checked) without those another one covers: the same keys, once each.

    nats-server refuses a consumer one of whose filters covers another (a
    duplicate, ``a.b`` beside ``a.*``, ``a.*`` beside ``a.>``: 10138); filters
    that only share some keys (``a.*``, ``*.b``) it takes. Only a wildcard
    filter covers another, and only one whose first token is the other's,
    ``*`` or ``>``: thousands of filters are not compared pair by pair.
    """
    unique = list(dict.fromkeys(filters))
    wide: dict[str, list[str]] = {}
    for f in unique:
        if _is_wildcard(f):
            wide.setdefault(f.split(".", 1)[0], []).append(f)

    def covered(f: str) -> bool:
        heads = {f.split(".", 1)[0], "*", ">"}
        return any(g != f and filter_covers(g, f) for h in heads for g in wide.get(h, ()))

    # Two different filters never cover each other, so no filter drops itself.
    return [f for f in unique if not covered(f)]


def key_bytes(key: str) -> int:
    """The length of ``key`` on the wire (UTF-8; a surrogate escape is one byte)."""
    return len(key) if key.isascii() else len(key.encode("utf-8", "surrogateescape"))


def stream_name(bucket: str) -> str:
    """The stream behind ``bucket``: ``KV_<bucket>``."""
    return STREAM_PREFIX + bucket


def subjects_prefix(bucket: str) -> str:
    """The prefix of every key subject of ``bucket``: ``$KV.<bucket>.``."""
    return f"$KV.{bucket}."
