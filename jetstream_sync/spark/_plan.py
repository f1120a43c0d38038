"""Planning reads: filter push-down, the sequence range, and its split into partitions."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._seam import parse_rfc3339
from ..errors import DataLossError
from ._fetch import ReadRange
from ._kafka import EARLIEST, LATEST, parse_millis, parse_offset
from ._subjects import check_filter, intersect, is_literal, prefix_filter

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.info import StreamInfo

log = logging.getLogger("jetstream_sync.spark")


def data_loss(message: str, fail: bool) -> None:
    """Raise :class:`DataLossError` with ``message``, or log it as a WARNING when not ``fail``.

    Raises:
        DataLossError: ``fail`` is true (``failOnDataLoss``, the default).
    """
    if fail:
        raise DataLossError(f"{message}; set failOnDataLoss=false to read on without them")
    log.warning("%s; reading on without them (failOnDataLoss=false)", message)


def parse_time(value: str | datetime, option: str) -> datetime:
    """An aware UTC datetime from an ISO 8601 / RFC 3339 string (or a datetime).

    A naive value is taken as UTC.

    Raises:
        ValueError: not a date and time.
    """
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = parse_rfc3339(value)
        except (ValueError, TypeError):
            try:
                dt = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"option {option!r}: {value!r} is not an ISO 8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt


@dataclass
class Bounds:
    """What the options and the pushed filters ask of a read, before the stream is looked at.

    Attributes:
        low: the lowest sequence wanted (None: the stream's first).
        high: the highest sequence wanted (None: the stream's last at planning).
        subject: the server-side filter (None: every subject).
        empty: no message can match.
        prefixes: subjects must start with these.
        min_time: only messages stored at or after this time.
    """

    low: int | None = None
    high: int | None = None
    subject: str | None = None
    empty: bool = False
    prefixes: tuple[str, ...] = ()
    min_time: datetime | None = None

    def at_least(self, seq: int) -> None:
        self.low = seq if self.low is None else max(self.low, seq)

    def at_most(self, seq: int) -> None:
        self.high = seq if self.high is None else min(self.high, seq)

    def only_subjects(self, subject_filter: str) -> None:
        possible, self.subject = intersect(self.subject, subject_filter)
        self.empty = self.empty or not possible

    def since(self, when: datetime) -> None:
        if self.min_time is None or when > self.min_time:
            self.min_time = when


def bounds_from_options(opts: Any) -> Bounds:
    """The :class:`Bounds` a batch read's options set.

    Those are ``subject``, ``startSeq``, ``endSeq``, ``startTime`` and Kafka's
    ``startingOffsets``, ``endingOffsets`` and ``startingTimestamp``.

    Raises:
        ValueError: a malformed option.
    """
    bounds = Bounds()
    subject = opts.get("subject")
    if subject:
        bounds.subject = check_filter(subject, "subject")
    start = opts.integer("startSeq", minimum=1)
    if start is not None:
        bounds.at_least(start)
    end = opts.integer("endSeq", minimum=0)
    if end is not None:
        bounds.at_most(end)
    start_time = opts.get("startTime")
    if start_time:
        bounds.since(parse_time(start_time, "startTime"))
    _kafka_bounds(bounds, opts)
    return bounds


def _kafka_bounds(bounds: Bounds, opts: Any) -> None:
    """Narrow ``bounds`` by Kafka's batch options (``startingOffsets``, ``endingOffsets``...).

    ``endingOffsets`` is exclusive, as in Kafka: the offset after the last
    message to read.

    Raises:
        ValueError: a malformed value, ``startingOffsets=latest`` or
            ``endingOffsets=earliest`` (a batch read refuses both, as Kafka's).
    """
    stream = opts.required("stream")
    starting = opts.get("startingOffsets")
    if starting:
        start = parse_offset(starting, "startingOffsets", stream)
        if start == LATEST:
            raise ValueError("option 'startingOffsets' cannot be latest on a batch read")
        if isinstance(start, int):
            bounds.at_least(max(start, 1))
    ending = opts.get("endingOffsets")
    if ending:
        end = parse_offset(ending, "endingOffsets", stream)
        if end == EARLIEST:
            raise ValueError("option 'endingOffsets' cannot be earliest on a batch read")
        if isinstance(end, int):
            bounds.at_most(end - 1)
    timestamp = opts.get("startingTimestamp")
    if timestamp:
        bounds.since(parse_millis(timestamp, "startingTimestamp"))


def push_filter(bounds: Bounds, kind: str, column: str, value: Any) -> bool:
    """Apply one Spark filter to ``bounds`` if JetStream can honour it exactly.

    Args:
        kind: the filter class name (``EqualTo``, ``GreaterThan``...).
        column: the column it tests.
        value: the value it compares with.

    Returns:
        True when the filter is now enforced by the read (Spark need not
        evaluate it); False when Spark must.
    """
    if column == "seq" and isinstance(value, int) and not isinstance(value, bool):
        if kind == "EqualTo":
            bounds.at_least(value)
            bounds.at_most(value)
        elif kind == "GreaterThan":
            bounds.at_least(value + 1)
        elif kind == "GreaterThanOrEqual":
            bounds.at_least(value)
        elif kind == "LessThan":
            bounds.at_most(value - 1)
        elif kind == "LessThanOrEqual":
            bounds.at_most(value)
        else:
            return False
        return True
    if column == "subject" and isinstance(value, str):
        if kind == "EqualTo":
            if is_literal(value):
                bounds.only_subjects(value)
            else:
                bounds.empty = True  # no stored subject has wildcards or is invalid
            return True
        if kind == "StringStartsWith":
            narrowed, exact = prefix_filter(value)
            if narrowed is not None:
                bounds.only_subjects(narrowed)
            if not exact:
                bounds.prefixes += (value,)
            return True
        return False
    if column == "timestamp" and isinstance(value, datetime) and kind == "GreaterThanOrEqual":
        bounds.since(parse_time(value, "timestamp"))
        return True
    return False


@dataclass(frozen=True)
class StreamPosition:
    """What planning learns about a stream: its range, creation time and direct-get support."""

    first: int
    last: int
    created: str
    direct: bool

    @classmethod
    def of(cls, info: StreamInfo) -> StreamPosition:
        state, config = info.state, info.config
        created = info.created.isoformat() if info.created is not None else ""
        return cls(
            first=state.first_seq if state else 0,
            last=state.last_seq if state else 0,
            created=created,
            direct=bool(config and config.allow_direct),
        )


def first_seq_at(ctx: JetStreamContext, stream: str, when: datetime) -> int | None:
    """The sequence of the first message stored at or after ``when`` (None: there is none)."""
    found = ctx.stream_no_info(stream).get_msgs(start_time=when, batch=1)
    if found:
        return found[0].seq
    return None


def check_start(low: int, pos: StreamPosition, fail_on_data_loss: bool, stream: str) -> int:
    """The first sequence to read given the stream's first; raise or warn when it is gone.

    Raises:
        DataLossError: ``low`` was already removed and ``fail_on_data_loss`` is set.
    """
    if pos.first and low < pos.first and low <= pos.last:
        data_loss(
            f"stream {stream!r}: the read starts at sequence {low} but the stream's first "
            f"message is now {pos.first}: messages {low}..{pos.first - 1} were removed "
            "(a purge, limits or deletes) before they were read",
            fail_on_data_loss,
        )
        return pos.first
    return low


def split(base: ReadRange, parts: int) -> list[ReadRange]:
    """Split ``base``'s sequences into at most ``parts`` contiguous ranges of near-equal size."""
    total = base.end - base.start + 1
    if total <= 0:
        return []
    parts = max(1, min(parts, total))
    size, extra = divmod(total, parts)
    out, start = [], base.start
    for i in range(parts):
        end = start + size - 1 + (1 if i < extra else 0)
        out.append(replace(base, start=start, end=end))
        start = end + 1
    return out


def plan_range(
    ctx: JetStreamContext,
    stream: str,
    bounds: Bounds,
    fail_on_data_loss: bool,
    pos: StreamPosition,
) -> ReadRange | None:
    """The whole range a batch read covers, or None when nothing can match."""
    if bounds.empty or pos.last == 0:
        return None
    low = bounds.low if bounds.low is not None else max(pos.first, 1)
    if bounds.low is not None:
        low = check_start(low, pos, fail_on_data_loss, stream)
    low = max(low, pos.first, 1)
    high = pos.last if bounds.high is None else min(bounds.high, pos.last)
    if bounds.min_time is not None:
        at = first_seq_at(ctx, stream, bounds.min_time) if pos.direct else None
        if pos.direct and at is None:
            return None
        if at is not None:
            low = max(low, at)
    if low > high:
        return None
    return ReadRange(
        stream=stream, start=low, end=high, subject=bounds.subject, prefixes=bounds.prefixes,
        min_time=bounds.min_time, direct=pos.direct,
    )  # fmt: skip
