"""``schedule add|ls|rm``: message schedules (ADR-51) of a stream.

``schedule add SUBJECT TARGET [BODY]`` takes exactly one of ``--at`` (an ISO 8601 time,
naive meaning UTC, or a duration from now such as ``10m``), ``--every`` (a duration,
at least 1 s) and ``--cron`` (6 fields, seconds first, or ``@hourly``...).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..jetstream.schedule import ScheduleInfo
from ._args import duration, header, until
from ._connect import session
from ._errors import CommandError
from ._output import Output, escaped, format_time, payload, text_fields, wire_bytes


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``schedule`` command group."""
    group = commands.add_parser("schedule", help="message schedules")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("add", parents=[common], help="store a schedule on a subject")
    p.add_argument("subject", help="the schedule's own subject")
    p.add_argument("target", help="where the stream publishes (a subject of the same stream)")
    p.add_argument("body", nargs="?", default="", help="the body to publish (default: empty)")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", type=until, help="once, at this time (or this long from now)")
    when.add_argument("--every", type=duration, help="repeatedly, every DURATION (>= 1s)")
    when.add_argument("--cron", help="a 6-field cron spec (seconds first) or @hourly...")
    p.add_argument("--time-zone", help="the IANA zone a --cron runs in (default UTC)")
    p.add_argument("--ttl", type=duration, help="how long produced messages live")
    p.add_argument("-H", "--header", type=header, action="append", default=[], metavar="K:V")
    p.set_defaults(run=add)

    p = sub.add_parser("ls", parents=[common], help="the schedules stored in a stream")
    p.add_argument("stream")
    p.add_argument("filter", nargs="?", default=">", help="a subject filter (default: all)")
    p.set_defaults(run=ls)

    p = sub.add_parser("rm", parents=[common], help="remove the schedule on a subject")
    p.add_argument("subject")
    p.set_defaults(run=rm)


def info_doc(info: ScheduleInfo) -> dict[str, Any]:
    """A schedule as a JSON document."""
    return {
        **text_fields("subject", info.subject),
        **text_fields("target", info.target),
        "spec": info.spec,
        "time_zone": info.time_zone,
        "ttl": info.ttl,
        "next_run": info.next_run.isoformat() if info.next_run else None,
        "seq": info.seq,
        **payload("data", info.data),
    }


def info_text(info: ScheduleInfo) -> str:
    """A schedule for people: ``subject -> target: spec [zone] (next: time)``."""
    zone = f" [{info.time_zone}]" if info.time_zone else ""
    nxt = f" (next: {format_time(info.next_run)})" if info.next_run else ""
    return f"{escaped(info.subject)} -> {escaped(info.target)}: {info.spec}{zone}{nxt}"


def add(args: argparse.Namespace, out: Output) -> int:
    """Store the schedule; print where it was stored."""
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(value)
    with session(args) as nc:
        ack = nc.jetstream(timeout=args.timeout).schedule(
            args.subject, args.target, wire_bytes(args.body),
            at=args.at, every=args.every, cron=args.cron, time_zone=args.time_zone,
            ttl=args.ttl, headers=headers or None,
        )  # fmt: skip
    out.result(
        {**text_fields("subject", args.subject), "stream": ack.stream, "seq": ack.seq},
        f"Scheduled {escaped(args.subject)} in stream {ack.stream} (seq {ack.seq})",
    )
    return 0


def ls(args: argparse.Namespace, out: Output) -> int:
    """Print the stream's schedules, by subject."""
    with session(args) as nc:
        found = nc.jetstream(timeout=args.timeout).schedules(args.stream, args.filter)
    out.result(
        [info_doc(i) for i in found], lambda: "\n".join(map(info_text, found)) or "no schedules"
    )
    return 0


def rm(args: argparse.Namespace, out: Output) -> int:
    """Remove the schedule on the subject; exit 1 when there was none."""
    with session(args) as nc:
        removed = nc.jetstream(timeout=args.timeout).cancel_schedule(args.subject)
    if not removed:
        raise CommandError(f"no schedule on {args.subject!r}")
    out.result(
        {**text_fields("subject", args.subject), "removed": True},
        f"Removed the schedule on {escaped(args.subject)}",
    )
    return 0
