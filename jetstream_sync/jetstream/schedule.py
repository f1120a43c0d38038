"""Message schedules (ADR-51): a stored message the stream republishes to a target later.

The last message on a schedule subject is that subject's schedule; its headers say when
(``Nats-Schedule``), where (``Nats-Schedule-Target``, a subject of the same stream), in
which zone (``Nats-Schedule-Time-Zone``) and with which TTL (``Nats-Schedule-TTL``) the
stream publishes its body. Deleting that message removes the schedule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from .._subjects import publish_subject
from .._timefmt import format_rfc3339, parse_rfc3339
from ..errors import MessageNotFoundError, NotAScheduleError
from . import _api
from ._cron import AT, EVERY, check_pattern, go_duration_seconds
from .info import RawStreamMsg
from .publish import ttl_header_value

if TYPE_CHECKING:
    from .context import HeadersIn
    from .stream import Stream

__all__ = ["ScheduleInfo", "cancel_schedule", "list_schedules", "schedule_headers"]

SCHEDULE = "Nats-Schedule"
TARGET = "Nats-Schedule-Target"
TIME_ZONE = "Nats-Schedule-Time-Zone"
TTL = "Nats-Schedule-TTL"
SOURCE = "Nats-Schedule-Source"
ROLLUP = "Nats-Schedule-Rollup"
SCHEDULER = "Nats-Scheduler"
NEXT = "Nats-Schedule-Next"

# JetStream API levels: "@at" came with 2.12; cron, "@every", time zones, sources and
# rollups with 2.14.
AT_LEVEL = 2
CRON_LEVEL = 4


def check_cron(expr: str) -> str:
    """Check a ``cron=`` pattern as the server reads it (see :mod:`._cron`).

    Returns:
        The pattern to send (whitespace normalised, a predefined name lower-cased).

    Raises:
        ValueError: the server would refuse it.
        TypeError: not a ``str``.
    """
    return check_pattern(expr)


def _duration(seconds: float) -> str:
    """Go ``time.ParseDuration`` text for whole milliseconds."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _every(every: float | timedelta) -> str:
    if isinstance(every, timedelta):
        seconds = every.total_seconds()
    elif isinstance(every, int | float) and not isinstance(every, bool):
        seconds = float(every)
    else:
        raise TypeError(f"every must be seconds or a timedelta, got {type(every).__name__}")
    if not 1 <= seconds < math.inf:
        raise ValueError(f"every must be at least 1 second and finite, got {every!r}")
    duration = _duration(seconds)
    try:
        go_duration_seconds(duration)
    except ValueError:
        raise ValueError(
            f"every must fit a Go duration (at most about 292 years), got {every!r}"
        ) from None
    return f"@every {duration}"


def _at(at: datetime) -> str:
    if not isinstance(at, datetime):
        raise TypeError(f"at must be a datetime, got {type(at).__name__}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("at must be timezone-aware (a naive datetime is ambiguous)")
    try:
        spec = f"@at {format_rfc3339(at)}"
    except OverflowError:  # its UTC time falls outside datetime's years 1 to 9999
        raise ValueError(f"at must be between 1678 and 2262, got {at!r}") from None
    return check_pattern(spec)  # the years the server can keep


def check_time_zone(name: str) -> str:
    """Check an IANA zone name (``Europe/Paris``) with :mod:`zoneinfo`.

    Raises:
        ValueError: the name is unknown here (and so likely to the server).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"time_zone must be an IANA zone name, got {name!r}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None
    return name


def schedule_headers(
    subject: str,
    target: str,
    *,
    at: datetime | None = None,
    every: float | timedelta | None = None,
    cron: str | None = None,
    time_zone: str | None = None,
    ttl: float | None = None,
    source: str | None = None,
    rollup: bool = False,
    headers: HeadersIn | None = None,
) -> tuple[dict[str, Any], int]:
    """The headers of a schedule message and the JetStream API level they need.

    Raises:
        ValueError, TypeError, BadSubjectError: see :meth:`JetStreamContext.schedule`.
    """
    publish_subject(subject)
    publish_subject(target, "target")
    if target == subject:
        raise ValueError("target must differ from the schedule's subject")
    given = [name for name, v in (("at", at), ("every", every), ("cron", cron)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of at, every, cron (got {given or 'none'})")
    if source is not None:
        publish_subject(source, "source")
        if source in (subject, target):
            raise ValueError("source must differ from the schedule's subject and target")
    if not isinstance(rollup, bool):
        raise TypeError(f"rollup must be True or False, got {rollup!r}")
    out: dict[str, Any] = {}
    for key, value in (headers or {}).items():
        if key.lower().startswith("nats-schedule") or key.lower() == "nats-scheduler":
            raise ValueError(f"header {key!r} is set by schedule()'s arguments")
        if key.lower() == "nats-rollup" and value != "sub":
            # The schedule message itself rolls up its subject; the server refuses others.
            raise ValueError(f"header {key!r}: a schedule takes only 'sub', got {value!r}")
        out[key] = value
    if at is not None:
        spec, level = _at(at), AT_LEVEL
    elif every is not None:
        spec, level = _every(every), CRON_LEVEL
    else:
        spec = check_cron(cron or "")
        level = AT_LEVEL if spec.startswith(AT) else CRON_LEVEL
    out[SCHEDULE] = spec
    out[TARGET] = target
    if time_zone is not None:
        if cron is None or spec.startswith((AT, EVERY)):
            raise ValueError("time_zone applies to cron schedules only (not @at or @every)")
        out[TIME_ZONE] = check_time_zone(time_zone)
    if ttl is not None:
        out[TTL] = ttl_header_value(ttl)
    if source is not None:
        out[SOURCE], level = source, CRON_LEVEL
    if rollup:
        out[ROLLUP], level = "sub", CRON_LEVEL
    return out, level


def check_api_level(server_info: Mapping[str, Any], level: int, spec: str) -> None:
    """Refuse early when the server is too old for the schedule ``spec``.

    Raises:
        RequiredApiLevelError: names the nats-server version needed.
    """
    have = int(server_info.get("api_lvl", 0))
    if have < level:
        version = "2.12" if level <= AT_LEVEL else "2.14"
        raise _api.RequiredApiLevelError(
            412, 10185, f"the schedule {spec!r} needs nats-server {version} or newer"
        )


@attrs.frozen
class ScheduleInfo:
    """One stored schedule (the last message of its subject).

    Attributes:
        subject: the schedule's subject.
        target: where the stream publishes.
        spec: the ``Nats-Schedule`` text (``@at ...``, ``@every ...``, a cron spec).
        time_zone: the cron's IANA zone, or ``None`` (UTC).
        ttl: the ``Nats-Schedule-TTL`` text given to produced messages, or ``None``.
        next_run: when an ``@at`` schedule fires; ``None`` for repeating ones (the
            server stores no next time with the schedule, only on produced messages).
        data: the body the stream publishes.
        seq: the schedule message's stream sequence.
        source: the subject whose last message is published instead of ``data``
            (``Nats-Schedule-Source``), or ``None``.
        rollup: whether each produced message replaces the target's previous ones
            (``Nats-Schedule-Rollup: sub``).
    """

    subject: str
    target: str
    spec: str
    time_zone: str | None = None
    ttl: str | None = None
    next_run: datetime | None = None
    data: bytes = b""
    seq: int = 0
    source: str | None = None
    rollup: bool = False

    @classmethod
    def from_msg(cls, msg: RawStreamMsg) -> ScheduleInfo | None:
        """The schedule a stored message holds, or ``None`` when it holds none."""
        headers = msg.headers or {}
        spec = headers.get(SCHEDULE)
        if not spec:
            return None
        next_run = None
        if spec.startswith("@at "):
            try:
                next_run = parse_rfc3339(spec[4:].strip())
            except ValueError:
                next_run = None
        return cls(
            subject=msg.subject,
            target=headers.get(TARGET, ""),
            spec=spec,
            time_zone=headers.get(TIME_ZONE),
            ttl=headers.get(TTL),
            next_run=next_run,
            data=msg.data,
            seq=msg.seq,
            source=headers.get(SOURCE),
            rollup=headers.get(ROLLUP) == "sub",
        )


def cancel_schedule(stream: Stream, subject: str, timeout: float | None) -> bool:
    """Remove the schedule on ``subject`` from ``stream``: only a message that carries one.

    The subject's last message must be a schedule (the server keeps no other message on
    a schedule's subject); it is deleted by its sequence, so a message stored on the
    subject after the check stays.

    Returns:
        True when a schedule was removed, False when the subject holds no message.

    Raises:
        NotAScheduleError: the subject's last message is not a schedule.
    """
    try:
        last = stream.get_last_msg_for_subject(subject, timeout=timeout)
    except MessageNotFoundError:
        return False
    if ScheduleInfo.from_msg(last) is None:
        raise NotAScheduleError(subject, last.seq)
    try:
        return stream.delete_msg(last.seq, timeout=timeout)
    except MessageNotFoundError:  # removed meanwhile by someone else
        return False


def list_schedules(stream: Stream, filter: str, timeout: float | None) -> list[ScheduleInfo]:
    """The schedules stored in ``stream`` on subjects matching ``filter``, any number of them."""
    if stream.info(timeout=timeout).config.allow_direct:
        msgs = stream.get_last_msgs_for([filter], timeout=timeout)
    else:
        info = stream.info(subjects_filter=filter, timeout=timeout)
        subjects = sorted(info.state.subjects or {})
        msgs = [stream.get_last_msg_for_subject(s, timeout=timeout) for s in subjects]
    found = (ScheduleInfo.from_msg(m) for m in msgs)
    return sorted((s for s in found if s is not None), key=lambda s: s.subject)
