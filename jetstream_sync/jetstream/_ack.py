"""JetStream message metadata and acknowledgements (re-exported from the core).

They live in :mod:`jetstream_sync._ack_subject` so that a
:class:`~jetstream_sync.msg.Msg` reads its metadata and builds its
acknowledgements without importing this package.
"""

from __future__ import annotations

from .._ack_subject import (
    ACK,
    ACK_PREFIX,
    IN_PROGRESS,
    NAK,
    TERM,
    MsgMetadata,
    SequencePair,
    ack_tokens,
    nak_body,
    parse_metadata,
    term_body,
)

__all__ = [
    "ACK",
    "ACK_PREFIX",
    "IN_PROGRESS",
    "NAK",
    "TERM",
    "MsgMetadata",
    "SequencePair",
    "ack_tokens",
    "nak_body",
    "parse_metadata",
    "term_body",
]
