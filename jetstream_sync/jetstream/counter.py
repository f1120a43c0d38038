"""Distributed counters (ADR-49): a counter stream adds ``Nats-Incr`` increments per subject.

The server keeps, as the last message of each subject, a JSON body ``{"val": "<digits>"}``
holding the running total; each publish carries only the increment. Totals are arbitrary
precision on the server, and Python ints are too: they are read and written in pieces, so
``sys.set_int_max_str_digits`` (4,300 digits by default) does not bound them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._bigint import format_int, parse_int
from .._subjects import publish_subject, subject_matches
from ..errors import (
    CounterBrokenError,
    CounterNotFoundError,
    CountersNotEnabledError,
    MessageNotFoundError,
    StreamWrongExpectedError,
)
from ..headers import header_pairs
from .info import RawStreamMsg

if TYPE_CHECKING:
    from .context import HeadersIn, JetStreamContext
    from .stream import Stream

__all__ = [
    "Counter",
    "CounterEntry",
    "format_value",
    "increment_header",
    "open_counter",
    "parse_value",
]

INCR = "Nats-Incr"
SOURCES = "Nats-Counter-Sources"
# The most header bytes a stream stores (a uint16 length; more is refused with 10097):
# "NATS/1.0\r\n", each "Key: value\r\n", then "\r\n".
MAX_STORED_HEADER = 65_535
# Headers that would change what an increment means (or make the server refuse it), and
# the sourcing headers the server keeps: a Nats-Counter-Sources of the caller's is stored
# and breaks the counter for good.
_REFUSED_PREFIXES = ("nats-expected-",)
_REFUSED = {
    "nats-rollup", "nats-incr", "nats-ttl", "nats-msg-id",
    SOURCES.lower(), "nats-stream-source",
}  # fmt: skip


def format_value(value: int) -> str:
    """The decimal text of a counter value of any size (``str`` stops at 4,300 digits)."""
    return format_int(value)


def parse_value(text: str) -> int:
    """The counter value a decimal text (optional sign, ASCII digits) stands for, any size.

    Raises:
        ValueError: ``text`` is not such a text.
    """
    return parse_int(text)


def increment_header(delta: int) -> str:
    """The ``Nats-Incr`` value for ``delta``: ``+N`` or ``-N``.

    Raises:
        TypeError: ``delta`` is not an ``int`` (a ``bool`` is refused too).
    """
    if isinstance(delta, bool) or not isinstance(delta, int):
        raise TypeError(f"delta must be an int, got {type(delta).__name__}")
    return f"+{format_int(delta)}" if delta >= 0 else format_int(delta)


def _value(text: object, what: str) -> int:
    """A total or increment the server sent, of any size (not bound by int_max_str_digits)."""
    if not isinstance(text, str):
        raise ValueError(f"{what} is not a decimal integer: {text!r:.60}")
    try:
        return parse_int(text)
    except ValueError:
        raise ValueError(f"{what} is not a decimal integer: {text!r:.60}") from None


def _broken(msg: RawStreamMsg, why: str) -> CounterBrokenError:
    return CounterBrokenError(
        400, 10172, f"the stored message is not a counter: {why}",
        stream=msg.stream or None, seq=msg.seq or None, subject=msg.subject,
    )  # fmt: skip


def _sources(raw: str) -> dict[str, dict[str, int]]:
    """The ``Nats-Counter-Sources`` JSON: stream -> {subject -> total}.

    Raises:
        ValueError: it is not such a document.
    """
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError("not an object of objects")
    return {s: {k: _value(v, "source value") for k, v in m.items()} for s, m in doc.items()}


@attrs.frozen
class CounterEntry:
    """One subject's counter as stored: the total and what made it.

    Attributes:
        subject: the counter's subject.
        value: the total.
        increment: the last increment applied (``Nats-Incr`` of the stored message), or
            ``None`` when the message does not say.
        sources: for a stream that sources other counter streams, each source stream's
            per-subject totals (``Nats-Counter-Sources``); empty otherwise.
        seq: the stream sequence of the stored message.
    """

    subject: str
    value: int
    increment: int | None = None
    sources: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)
    seq: int = 0

    @classmethod
    def from_msg(cls, msg: RawStreamMsg) -> CounterEntry:
        """Read a counter from a stored message, whoever wrote it.

        Raises:
            CounterBrokenError: (also a ``ValueError``) the message is not a counter
                value (no ``val``, not digits), or its ``Nats-Incr`` or
                ``Nats-Counter-Sources`` cannot be read: the server refuses the
                subject's next increment with the same error.
        """
        try:
            body = json.loads(msg.data)
        except ValueError:
            raise _broken(msg, "its body is not JSON") from None
        if not isinstance(body, dict):
            raise _broken(msg, "its body is not a JSON object")
        headers = msg.headers or {}
        incr = headers.get(INCR)
        raw_sources = headers.get(SOURCES)
        try:
            sources = _sources(raw_sources) if raw_sources else {}
        except ValueError:
            raise _broken(msg, f"its {SOURCES} is unreadable: {raw_sources!r:.60}") from None
        try:
            return cls(
                subject=msg.subject,
                value=_value(body.get("val"), "counter value"),
                increment=None if incr is None else _value(incr, INCR),
                sources=sources,
                seq=msg.seq,
            )
        except ValueError as exc:
            raise _broken(msg, str(exc)) from None


def _check_headers(headers: HeadersIn | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (headers or {}).items():
        low = key.lower()
        if low in _REFUSED or low.startswith(_REFUSED_PREFIXES):
            raise ValueError(f"header {key!r} cannot be sent with a counter increment")
        out[key] = value
    return out


def _check_stored_size(headers: dict[str, Any]) -> None:
    """Refuse headers (the increment among them) longer than a stream stores."""
    size = len("NATS/1.0\r\n\r\n") + sum(
        len(key.encode()) + len(value.encode()) + 4 for key, value in header_pairs(headers)
    )
    if size > MAX_STORED_HEADER:
        raise ValueError(
            f"the increment's headers are {size:,} bytes; a stream stores at most "
            f"{MAX_STORED_HEADER:,} bytes of headers (an increment of at most about 65,500 "
            "digits); nothing was sent"
        )


class Counter:
    """The counters of one stream (made with :meth:`JetStreamContext.counter`).

    Args:
        ctx: the JetStream context.
        stream: the counter stream (``allow_msg_counter=True``).
    """

    def __init__(self, ctx: JetStreamContext, stream: Stream) -> None:
        self._ctx = ctx
        self.stream = stream

    @property
    def name(self) -> str:
        """The stream's name."""
        return self.stream.name

    def add(
        self,
        subject: str,
        delta: int,
        timeout: float | None = None,
        *,
        headers: HeadersIn | None = None,
    ) -> int:
        """Add ``delta`` (negative to subtract) to the counter on ``subject``.

        The increment is not idempotent: a retry after a timeout may count twice.

        Args:
            subject: the counter's subject (a subject of this stream, no wildcards).
            delta: any ``int``; totals beyond 64 bits work.
            timeout: seconds to wait for the server's answer.
            headers: extra headers stored with the increment; ``Nats-Expected-*``,
                ``Nats-Rollup``, ``Nats-TTL``, ``Nats-Msg-Id``, ``Nats-Incr`` and the
                sourcing headers the server keeps (``Nats-Counter-Sources``,
                ``Nats-Stream-Source``) are refused.

        Returns:
            The counter's new total.

        Raises:
            TypeError: ``delta`` is not an ``int``.
            BadSubjectError, ValueError: bad input (among it headers, the increment's
                text included, past the 65,535 bytes a stream stores); nothing was sent.
            StreamWrongExpectedError: ``subject`` is not a subject of this stream (another
                stream may capture it); nothing was sent.
            CountersNotEnabledError: the stream stopped being a counter stream.
            CounterIncrementInvalidError, CounterBrokenError: the server refused it.
        """
        publish_subject(subject)
        hdrs = _check_headers(headers)
        hdrs[INCR] = increment_header(delta)
        _check_stored_size(hdrs)
        self._check_own(subject, timeout)
        ack = self._ctx.publish(subject, b"", headers=hdrs, timeout=timeout)
        return _value(ack.val, "PubAck val")

    def _captures(self, subject: str) -> bool:
        info = self.stream.cached_info
        subjects = info.config.subjects if info is not None else None
        return any(subject_matches(subject, pattern) for pattern in subjects or ())

    def _check_own(self, subject: str, timeout: float | None) -> None:
        """Refuse a subject this stream does not capture, before anything is published.

        The server refuses ``Nats-Expected-Stream`` on increments, so the handle checks
        its stream's subjects itself (asking for them again once: they may have changed).
        """
        if self._captures(subject):
            return
        self.stream.info(timeout=timeout)
        if not self._captures(subject):
            raise StreamWrongExpectedError(
                400, 10060, "the subject is not one of the counter stream's subjects; "
                "nothing was sent", stream=self.name, subject=subject,
            )  # fmt: skip

    def load(self, subject: str, timeout: float | None = None) -> int:
        """The counter's total on ``subject``.

        Raises:
            CounterNotFoundError: nothing was ever counted on ``subject`` (as orbit's
                ``ErrNoCounterForSubject``: a missing counter is not silently 0).
        """
        return self.get(subject, timeout).value

    def get(self, subject: str, timeout: float | None = None) -> CounterEntry:
        """The counter on ``subject`` with its last increment and its sources.

        Raises:
            CounterNotFoundError: nothing was ever counted on ``subject``.
            CounterBrokenError: the stored message is not a readable counter.
            BadSubjectError: ``subject`` is not a publish subject; nothing was sent.
        """
        publish_subject(subject)
        try:
            msg = self.stream.get_last_msg_for_subject(subject, timeout=timeout)
        except MessageNotFoundError:
            raise CounterNotFoundError(subject) from None
        return CounterEntry.from_msg(msg)

    def get_many(
        self, subjects: str | Iterable[str], timeout: float | None = None
    ) -> Iterator[CounterEntry]:
        """The counters on ``subjects`` (wildcards allowed) in one batched direct get.

        Needs the stream's ``allow_direct`` and nats-server 2.11+. Subjects without a
        counter are left out.

        Args:
            subjects: one filter subject or several.
            timeout: seconds for the whole round trip.

        Raises:
            RequiredApiLevelError: the server is older than 2.11.
            CounterBrokenError: (while iterating) a matching subject's stored message
                is not a readable counter; the error names it.
        """
        wanted = [subjects] if isinstance(subjects, str) else list(subjects)
        msgs = self.stream.get_last_msgs_for(wanted, timeout=timeout)
        return (CounterEntry.from_msg(msg) for msg in msgs)


def open_counter(ctx: JetStreamContext, name: str, timeout: float | None = None) -> Counter:
    """A :class:`Counter` on stream ``name``, after checking it is a counter stream.

    Raises:
        StreamNotFoundError: no such stream.
        CountersNotEnabledError: the stream's ``allow_msg_counter`` is off.
    """
    stream = ctx.stream(name, timeout=timeout)
    info = stream.cached_info
    if info is None or not info.config.allow_msg_counter:
        raise CountersNotEnabledError(
            400, 10168, f"stream {name!r} is not a counter stream (allow_msg_counter is off)"
        )
    return Counter(ctx, stream)
