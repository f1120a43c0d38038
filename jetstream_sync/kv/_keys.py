"""Bucket names, keys and key filters: checked once, where they enter (ADR-8)."""

from __future__ import annotations

import re

from ..errors import InvalidBucketNameError, InvalidKeyError

STREAM_PREFIX = "KV_"
_BUCKET = re.compile(r"[a-zA-Z0-9_-]+")
_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")
_TOKEN = re.compile(r"[-/_=a-zA-Z0-9]+")


def check_bucket(bucket: str) -> str:
    """Return ``bucket`` if it is a valid bucket name.

    Raises:
        InvalidBucketNameError: empty, not a ``str``, or a character outside
            ``a-z A-Z 0-9 _ -`` (also a ``ValueError``).
    """
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        raise InvalidBucketNameError(f"invalid bucket name {bucket!r}: use a-z A-Z 0-9 _ -")
    return bucket


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid key (no wildcards).

    Raises:
        InvalidKeyError: empty, not a ``str``, a character outside
            ``-/_=.a-zA-Z0-9``, a leading or trailing dot, or an empty token.
    """
    if (
        not isinstance(key, str)
        or not _KEY.fullmatch(key)
        or key[0] == "."
        or key[-1] == "."
        or ".." in key
    ):
        raise InvalidKeyError(f"invalid key {key!r}")
    return key


def check_filter(key: str) -> str:
    """Return ``key`` if it is a valid key filter: tokens of key characters,
    ``*`` for one whole token, and ``>`` as the last token.

    Raises:
        InvalidKeyError: not a valid filter.
    """
    if not isinstance(key, str) or not key:
        raise InvalidKeyError(f"invalid key filter {key!r}")
    tokens = key.split(".")
    for i, token in enumerate(tokens):
        if token == "*" or (token == ">" and i == len(tokens) - 1):
            continue
        if not _TOKEN.fullmatch(token):
            raise InvalidKeyError(f"invalid key filter {key!r}")
    return key


def stream_name(bucket: str) -> str:
    """The stream behind ``bucket``: ``KV_<bucket>``."""
    return STREAM_PREFIX + bucket


def subjects_prefix(bucket: str) -> str:
    """The prefix of every key subject of ``bucket``: ``$KV.<bucket>.``."""
    return f"$KV.{bucket}."
