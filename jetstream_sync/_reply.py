"""What a raw reply is: the reply-route tuple, the status-line check and the readers the
protocol core can run on a reply's body (a seam).

Upper rooms that take replies raw, without a :class:`~jetstream_sync.msg.Msg`
each (JetStream's async-publish acks and batched direct gets through
``Client.add_reply_route``, the Spark reader), import this module and no
other private core module for it: one definition of the tuple they receive,
and one rule for telling a status message (``NATS/1.0 503``,
``NATS/1.0 404 No Messages``) from a message with ordinary headers. A room
that wants a request's reply read in the round trip that received it (the
JetStream publish's PubAck) passes one of this module's :class:`ReplyDecoder`
to ``Client.request(..., decode=...)``: the core knows how to read, the room
says what.
"""

from __future__ import annotations

import attrs

from ._protocol._py import DECODE_PUBACK

__all__ = ["PUBACK_FIELDS", "STATUS_OPENINGS", "Reply", "ReplyDecoder", "is_status_block"]

# What Client.add_reply_route hands its handler per reply: (token, payload, raw headers).
Reply = tuple[str, bytes, bytes | None]

# How a status block opens: ``NATS/1.0`` then a space or a tab (the header
# parser reads either there; a block without a status has its CRLF there). The
# version is compared too: a block another client wrote is delivered as it came
# and may open otherwise. Compare ``block[:9]`` with these in loops over many
# replies; elsewhere call :func:`is_status_block`.
STATUS_OPENINGS = (b"NATS/1.0 ", b"NATS/1.0\t")


def is_status_block(raw_headers: bytes | None) -> bool:
    """Whether a header block (``NATS/1.0`` ... blank line) opens with a status code.

    Cheap: nothing is parsed. ``None`` (no headers) and ``NATS/1.0\\r\\n``
    followed by headers are not status blocks.
    """
    return raw_headers is not None and raw_headers[:9] in STATUS_OPENINGS


@attrs.frozen
class ReplyDecoder:
    """A reader of a reply's body that the protocol core runs in the round trip that received it.

    Passed to ``Client.request(..., decode=...)``: when the calling thread reads
    its own reply and the reply came alone (see ``docs/architecture.md``), the
    core reads the body in the same C call, with the GIL released, and the
    request returns ``(fields, body)`` without a :class:`~jetstream_sync.msg.Msg`.

    Attributes:
        name: what it reads, for messages.
        code: the core's reader (``DECODE_*`` of ``jetstream_sync._protocol``).
    """

    name: str
    code: int


PUBACK_FIELDS = ReplyDecoder("PubAck fields", DECODE_PUBACK)
"""Reads a plain PubAck (a flat JSON object, no headers) into ``(stream, seq, duplicate,
domain)``, as ``_protocol.parse_puback`` does; any other body is left to the caller."""
