"""JetStream message metadata and acknowledgements: ack-subject parsing and the ack bodies.

Core, so that :class:`~jetstream_sync.msg.Msg` reads its metadata and builds
its acknowledgements without importing the JetStream package.

A message delivered by a consumer carries an ack subject as its reply. Two
layouts exist (``server/consumer.go``):

- v1, 9 tokens: ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.
  <consumer seq>.<ns>.<pending>``
- v2, 11 or more: ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.
  <stream seq>.<consumer seq>.<ns>.<pending>[.<more>]`` (domain ``_`` means none).

The acknowledgement is the body published to that subject: ``+ACK``,
``-NAK`` (optionally followed by ``{"delay": ns}``), ``+WPI``, ``+TERM``
(optionally followed by a reason).
"""

from __future__ import annotations

import json
from datetime import datetime

import attrs

from ._timefmt import datetime_from_ns, seconds_to_ns
from .errors import NotJetStreamMsgError

ACK_PREFIX = "$JS.ACK."
ACK = b"+ACK"
NAK = b"-NAK"
IN_PROGRESS = b"+WPI"
TERM = b"+TERM"
_MAX_NS = 2**63 - 1  # a Go time.Duration: what the server reads a nak delay into

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


@attrs.frozen(kw_only=True)
class SequencePair:
    """A message's position in the stream and in the consumer.

    Attributes:
        stream: the stream sequence.
        consumer: the consumer sequence (the delivery count of the consumer).
    """

    stream: int
    consumer: int


@attrs.frozen(kw_only=True)
class MsgMetadata:
    """What a JetStream message's ack subject says about it.

    Attributes:
        stream: the stream that stores it.
        consumer: the consumer that delivered it.
        sequence: its stream and consumer sequences.
        num_delivered: how many times it was delivered (1 the first time).
        num_pending: messages left for the consumer after this one.
        timestamp: when the stream stored it (UTC; keeps nanoseconds: a
            ``NanoDatetime`` with ``.nanosecond`` and ``.epoch_ns``).
        domain: the JetStream domain, or ``None``.
    """

    stream: str
    consumer: str
    sequence: SequencePair
    num_delivered: int
    num_pending: int
    timestamp: datetime
    domain: str | None = None


def ack_tokens(reply: str) -> list[str]:
    """The tokens of an ack subject in v2 order, ``domain`` and ``hash`` included.

    Returns ``[domain, hash, stream, consumer, delivered, sseq, cseq, ns,
    pending]`` (``domain`` and ``hash`` are ``""`` for a v1 subject).

    Raises:
        NotJetStreamMsgError: ``reply`` is not an ack subject.
    """
    if not reply.startswith(ACK_PREFIX):
        raise NotJetStreamMsgError(f"not a JetStream message (reply {reply!r})")
    tokens = reply.split(".")
    n = len(tokens)
    if n == 9:
        return ["", "", *tokens[2:9]]
    if n >= 11:
        return tokens[2:11]
    raise NotJetStreamMsgError(f"unrecognised ack subject {reply!r}")


def parse_metadata(reply: str) -> MsgMetadata:
    """The metadata of a JetStream message from its ack subject (``reply``).

    Raises:
        NotJetStreamMsgError: ``reply`` is not an ack subject.
    """
    domain, _, stream, consumer, delivered, sseq, cseq, ns, pending = ack_tokens(reply)
    try:
        return MsgMetadata(
            stream=stream,
            consumer=consumer,
            sequence=SequencePair(stream=int(sseq), consumer=int(cseq)),
            num_delivered=int(delivered),
            num_pending=int(pending),
            timestamp=datetime_from_ns(int(ns)),
            domain=domain if domain and domain != "_" else None,
        )
    except ValueError:
        raise NotJetStreamMsgError(f"unrecognised ack subject {reply!r}") from None


def nak_body(delay: float | None) -> bytes:
    """The body of a negative acknowledgement, with an optional redelivery delay in seconds.

    A delay of zero or less is a plain NAK (redeliver at once), as in nats.go: the
    server reads a delay as "the ack wait ran out ``delay`` ago", which with a
    ``backoff`` holds a redelivered message for its next backoff step instead.

    Raises:
        TypeError: ``delay`` is not a number.
        ValueError: ``delay`` is NaN, infinite, or longer than int64 nanoseconds hold
            (about 292 years: the server would read a bad delay and redeliver at once).
    """
    if delay is None:
        return NAK
    ns = seconds_to_ns(delay, "delay")
    if ns > _MAX_NS:
        raise ValueError(f"delay: must be at most {_MAX_NS // 10**9} seconds, got {delay!r}")
    if ns <= 0:
        return NAK
    return NAK + b" " + json.dumps({"delay": ns}).encode()


def term_body(reason: str | None) -> bytes:
    """The body of a terminate acknowledgement, with an optional reason.

    Raises:
        TypeError: ``reason`` is not a str.
    """
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a str, not {type(reason).__name__}")
    if not reason:
        return TERM
    return TERM + b" " + reason.encode()
