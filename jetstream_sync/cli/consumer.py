"""``consumer ls|info|add|rm|next|unpin|pause|resume``: JetStream consumers of a stream.

``add`` makes a durable pull consumer unless ``--target`` names a push
delivery subject; ``next`` fetches and acknowledges (and waits for the server
to confirm each ack, so nothing is redelivered after the command exits).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..jetstream.config import ConsumerConfig
from ..jetstream.enums import AckPolicy, DeliverPolicy, PriorityPolicy
from ..jetstream.info import ConsumerInfo
from ._args import (
    add_defaults_flag,
    add_force_flag,
    count,
    duration,
    limit,
    positive_duration,
    subjects,
    until,
)
from ._connect import session
from ._errors import CommandError
from ._output import Output, format_enum, format_time
from .stream import show_stored

_ACK = {"explicit": AckPolicy.EXPLICIT, "none": AckPolicy.NONE, "all": AckPolicy.ALL}
_DELIVER = {
    "all": DeliverPolicy.ALL,
    "last": DeliverPolicy.LAST,
    "new": DeliverPolicy.NEW,
    "last_per_subject": DeliverPolicy.LAST_PER_SUBJECT,
}


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``consumer`` command group."""
    group = commands.add_parser("consumer", help="manage JetStream consumers")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("ls", parents=[common], help="list a stream's consumers")
    p.add_argument("stream")
    p.add_argument("--names", action="store_true", help="print only the names")
    p.set_defaults(run=ls)

    p = sub.add_parser("info", parents=[common], help="a consumer's config and state")
    p.add_argument("stream")
    p.add_argument("name")
    p.set_defaults(run=info)

    p = sub.add_parser("add", parents=[common], help="create a durable consumer")
    p.add_argument("stream")
    p.add_argument("name")
    p.add_argument(
        "--filter",
        action="append",
        metavar="SUBJECT",
        help="only messages on SUBJECT (repeat or comma-separate for more)",
    )
    p.add_argument(
        "--ack",
        choices=sorted(_ACK),
        default="explicit",
        help="acknowledgement policy (default explicit)",
    )
    p.add_argument(
        "--deliver",
        default=None,
        metavar="POLICY",
        help="where to start: all (default), last, new, last_per_subject, or a stream sequence",
    )
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--pull", action="store_true", help="a pull consumer (the default)")
    kind.add_argument("--target", metavar="SUBJECT", help="a push consumer delivering here")
    p.add_argument("--description")
    p.add_argument("--max-deliver", type=limit, help="deliveries per message (-1: unlimited)")
    p.add_argument("--ack-wait", type=positive_duration, help="redeliver after (e.g. 30s)")
    p.add_argument("--max-pending", type=limit, help="most unacknowledged messages")
    p.add_argument(
        "--inactive-threshold",
        type=duration,
        help="delete the consumer after this long without activity",
    )
    p.add_argument(
        "--priority-policy",
        choices=[policy.value for policy in PriorityPolicy if policy is not PriorityPolicy.NONE],
        help="priority groups: how waiting pulls are chosen (needs --priority-group)",
    )
    p.add_argument(
        "--priority-group",
        action="append",
        metavar="GROUP",
        help="a priority group name (repeat for more)",
    )
    p.add_argument(
        "--priority-timeout",
        type=positive_duration,
        help="pinned_client: how long a pin lasts without pulls (e.g. 2m)",
    )
    add_defaults_flag(p)
    p.set_defaults(run=add)

    p = sub.add_parser("rm", parents=[common], help="delete a consumer")
    p.add_argument("stream")
    p.add_argument("name")
    add_force_flag(p)
    p.set_defaults(run=rm)

    p = sub.add_parser("next", parents=[common], help="fetch, print and acknowledge messages")
    p.add_argument("stream")
    p.add_argument("name")
    p.add_argument("--count", type=count, default=1, help="how many messages (default 1)")
    p.add_argument("--no-ack", action="store_true", help="do not acknowledge them")
    p.add_argument(
        "--wait",
        type=positive_duration,
        default=None,
        metavar="DURATION",
        help="how long to wait for messages (default: --timeout)",
    )
    p.add_argument("--group", help="pull in this priority group (consumers with groups)")
    p.add_argument(
        "--priority", type=int, help="prioritized groups: 0 (first served) to 9 (needs --group)"
    )
    p.set_defaults(run=next_)

    p = sub.add_parser("unpin", parents=[common], help="unpin the client pinned in a group")
    p.add_argument("stream")
    p.add_argument("name")
    p.add_argument("group")
    p.set_defaults(run=unpin)

    p = sub.add_parser("pause", parents=[common], help="pause a consumer until a time")
    p.add_argument("stream")
    p.add_argument("name")
    p.add_argument("until", type=until, help="an ISO 8601 time, or a duration from now (1h)")
    p.set_defaults(run=pause)

    p = sub.add_parser("resume", parents=[common], help="resume a paused consumer")
    p.add_argument("stream")
    p.add_argument("name")
    p.set_defaults(run=resume)


def describe(info: ConsumerInfo) -> str:
    """A consumer's info for people."""
    cfg = info.config or ConsumerConfig()

    filters = cfg.filter_subjects or ((cfg.filter_subject,) if cfg.filter_subject else ())
    kind = f"push to {cfg.deliver_subject!r}" if cfg.deliver_subject else "pull"
    lines = [
        f"Consumer {info.stream_name} > {info.name} ({kind})",
        f"  filter: {', '.join(filters) or '(all subjects)'}",
        f"  ack policy: {format_enum(cfg.ack_policy)}, "
        f"deliver policy: {format_enum(cfg.deliver_policy)}",
        f"  created: {format_time(info.created)}",
        *_priority_config(cfg),
        "State",
        f"  delivered: stream seq {info.delivered.stream_seq if info.delivered else 0}",
        f"  ack pending: {info.num_ack_pending}, redelivered: {info.num_redelivered}, "
        f"waiting pulls: {info.num_waiting}, unprocessed: {info.num_pending}",
    ]
    if cfg.priority_policy is PriorityPolicy.PINNED_CLIENT:
        lines.extend(_pins(info))
    if info.paused:
        lines.append(f"  paused until {format_time(cfg.pause_until)}")
    return "\n".join(lines)


def _priority_config(cfg: ConsumerConfig) -> list[str]:
    """The priority policy, groups and pin timeout, if the consumer has groups."""
    if cfg.priority_policy in (None, PriorityPolicy.NONE):
        return []
    line = f"  priority: {format_enum(cfg.priority_policy)}, "
    line += f"groups: {', '.join(cfg.priority_groups or ())}"
    if cfg.priority_timeout:
        line += f", timeout {cfg.priority_timeout:g}s"
    return [line]


def _pins(info: ConsumerInfo) -> list[str]:
    """Who is pinned in each group the server reports on (PINNED_CLIENT)."""
    lines = []
    for state in info.priority_groups or ():
        if state.pinned_client_id:
            since = format_time(state.pinned_ts)
            lines.append(f"  group {state.group}: pinned {state.pinned_client_id} since {since}")
        else:
            lines.append(f"  group {state.group}: no client pinned")
    return lines


def ls(args: argparse.Namespace, out: Output) -> int:
    """List a stream's consumers."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        if args.names:
            names = sorted(js.consumer_names(args.stream))
            out.result(names, lambda: "\n".join(names) or "no consumers")
            return 0
        infos = sorted(js.consumers(args.stream), key=lambda i: i.name)
    out.result(infos, lambda: "\n\n".join(map(describe, infos)) or "no consumers")
    return 0


def info(args: argparse.Namespace, out: Output) -> int:
    """Print a consumer's config and state."""
    with session(args) as nc:
        found = nc.jetstream(timeout=args.timeout).consumer_info(args.stream, args.name)
    out.result(found, lambda: describe(found))
    return 0


def _deliver(text: str | None) -> dict[str, Any]:
    """``--deliver`` as config fields."""
    if text is None:
        return {}
    if text.isdigit() and int(text) > 0:
        return {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": int(text)}
    if text.lower() in _DELIVER:
        return {"deliver_policy": _DELIVER[text.lower()]}
    raise CommandError(
        f"--deliver must be one of {', '.join(_DELIVER)} or a sequence, got {text!r}"
    )


def add(args: argparse.Namespace, out: Output) -> int:
    """Create (or confirm, when identical) a durable consumer."""
    filters = subjects(args.filter)
    fields: dict[str, Any] = {
        "durable_name": args.name,
        "ack_policy": _ACK[args.ack],
        "description": args.description,
        "deliver_subject": args.target,
        "max_deliver": args.max_deliver,
        "ack_wait": args.ack_wait,
        "max_ack_pending": args.max_pending,
        "inactive_threshold": args.inactive_threshold,
        "priority_policy": args.priority_policy and PriorityPolicy(args.priority_policy),
        "priority_groups": args.priority_group,
        "priority_timeout": args.priority_timeout,
        **_deliver(args.deliver),
    }
    if len(filters) == 1:
        fields["filter_subject"] = filters[0]
    elif filters:
        fields["filter_subjects"] = filters
    config = ConsumerConfig(**{k: v for k, v in fields.items() if v is not None})
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        created = js.create_consumer(args.stream, config).info()
    out.result(created, lambda: f"Created consumer {args.name}\n{describe(created)}")
    return 0


def rm(args: argparse.Namespace, out: Output) -> int:
    """Delete a consumer."""
    with session(args) as nc:
        nc.jetstream(timeout=args.timeout).delete_consumer(args.stream, args.name)
    out.result(
        {"stream": args.stream, "consumer": args.name, "deleted": True},
        f"Deleted consumer {args.stream} > {args.name}",
    )
    return 0


def next_(args: argparse.Namespace, out: Output) -> int:
    """Fetch up to ``--count`` messages, print them, ack them (confirmed) unless ``--no-ack``."""
    wait = args.wait or args.timeout
    got = 0
    with session(args) as nc:
        consumer = nc.jetstream(timeout=args.timeout).consumer(args.stream, args.name)
        cfg = consumer.cached_info.config if consumer.cached_info else None
        acks = not args.no_ack and (cfg is None or cfg.ack_policy is not AckPolicy.NONE)
        turn = (cfg.max_batch if cfg is not None else None) or args.count  # the server's cap
        while got < args.count:
            batch = consumer.fetch(
                batch=min(args.count - got, turn), timeout=wait,
                group=args.group, priority=args.priority,
            )  # fmt: skip
            if not batch:
                break
            for msg in batch:
                show_stored(out, msg)
                if acks:
                    msg.ack_sync(timeout=args.timeout)
            got += len(batch)
    if not got:
        raise CommandError(f"no message received within {wait:g}s")
    return 0


def unpin(args: argparse.Namespace, out: Output) -> int:
    """Unpin the client pinned in a priority group: the server pins the next one to pull."""
    with session(args) as nc:
        consumer = nc.jetstream(timeout=args.timeout).consumer(args.stream, args.name)
        consumer.unpin(args.group, timeout=args.timeout)
    out.result(
        {"stream": args.stream, "consumer": args.name, "group": args.group, "unpinned": True},
        lambda: f"Unpinned group {args.group} of consumer {args.name}",
    )
    return 0


def _paused(args: argparse.Namespace, out: Output, response: Any) -> None:
    """Print a pause/resume answer."""
    until_text = response.pause_until.isoformat() if response.pause_until else None
    doc = {
        "stream": args.stream,
        "consumer": args.name,
        "paused": response.paused,
        "pause_until": until_text,
    }
    text = (
        f"Paused {args.stream} > {args.name} until {until_text}"
        if response.paused
        else f"Resumed {args.stream} > {args.name}"
    )
    out.result(doc, text)


def pause(args: argparse.Namespace, out: Output) -> int:
    """Pause delivery until a time."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        response = js.pause_consumer(args.stream, args.name, args.until)
    _paused(args, out, response)
    return 0


def resume(args: argparse.Namespace, out: Output) -> int:
    """Resume delivery."""
    with session(args) as nc:
        response = nc.jetstream(timeout=args.timeout).resume_consumer(args.stream, args.name)
    _paused(args, out, response)
    return 0
