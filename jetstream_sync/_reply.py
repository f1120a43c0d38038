"""What a raw reply is: the reply-route tuple and the status-line check (a seam).

Upper rooms that take replies raw, without a :class:`~jetstream_sync.msg.Msg`
each (JetStream's async-publish acks and batched direct gets through
``Client.add_reply_route``, the Spark reader), import this module and no
other private core module for it: one definition of the tuple they receive,
and one rule for telling a status message (``NATS/1.0 503``,
``NATS/1.0 404 No Messages``) from a message with ordinary headers.
"""

from __future__ import annotations

__all__ = ["STATUS_SEPARATORS", "Reply", "is_status_block"]

# What Client.add_reply_route hands its handler per reply: (token, payload, raw headers).
Reply = tuple[str, bytes, bytes | None]

# The bytes that may follow ``NATS/1.0`` before a status code: the header
# parser reads a space or a tab there (anything else is a protocol error), and
# a block without a status has its CRLF there. Compare ``block[8:9]`` with
# these in loops over many replies; elsewhere call :func:`is_status_block`.
STATUS_SEPARATORS = (b" ", b"\t")


def is_status_block(raw_headers: bytes | None) -> bool:
    """Whether a header block (``NATS/1.0`` ... blank line) opens with a status code.

    Cheap: nothing is parsed. ``None`` (no headers) and ``NATS/1.0\\r\\n``
    followed by headers are not status blocks.
    """
    return raw_headers is not None and raw_headers[8:9] in STATUS_SEPARATORS
