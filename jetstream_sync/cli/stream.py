"""``stream ls|info|add|edit|rm|purge|get|view``: JetStream streams.

Nothing prompts: ``add`` uses the server's defaults for what is not given
(``--defaults`` is accepted for scripts written for the ``nats`` CLI), and
``rm`` deletes at once (``-f`` is accepted likewise).
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from ..jetstream.config import StreamConfig
from ..jetstream.enums import (
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StoreCompression,
)
from ..jetstream.info import StreamInfo
from ._args import (
    STORAGE,
    add_defaults_flag,
    add_force_flag,
    count,
    duration,
    limit,
    size_limit,
    subject_list,
    subjects,
)
from ._connect import session
from ._errors import CommandError
from ._output import (
    Output,
    escaped,
    format_bytes,
    format_enum,
    format_time,
    message_doc,
    message_text,
)

VIEW_DEFAULT = 100
_RETENTION = {
    "limits": RetentionPolicy.LIMITS,
    "interest": RetentionPolicy.INTEREST,
    "workqueue": RetentionPolicy.WORK_QUEUE,
    "work_queue": RetentionPolicy.WORK_QUEUE,
}
_DISCARD = {"old": DiscardPolicy.OLD, "new": DiscardPolicy.NEW}
_COMPRESSION = {"none": StoreCompression.NONE, "s2": StoreCompression.S2}


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``stream`` command group."""
    group = commands.add_parser("stream", help="manage JetStream streams")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("ls", parents=[common], help="list streams")
    p.add_argument("--subject", help="only streams capturing this subject")
    p.add_argument("--names", action="store_true", help="print only the names")
    p.set_defaults(run=ls)

    p = sub.add_parser("info", parents=[common], help="a stream's config and state")
    p.add_argument("name")
    p.set_defaults(run=info)

    p = sub.add_parser("add", parents=[common], help="create a stream")
    p.add_argument("name")
    _config_options(p)
    add_defaults_flag(p)
    p.set_defaults(run=add)

    p = sub.add_parser("edit", parents=[common], help="change a stream's config")
    p.add_argument("name")
    _config_options(p)
    p.set_defaults(run=edit)

    p = sub.add_parser("rm", parents=[common], help="delete a stream and its messages")
    p.add_argument("name")
    add_force_flag(p)
    p.set_defaults(run=rm)

    p = sub.add_parser("purge", parents=[common], help="remove messages from a stream")
    p.add_argument("name")
    p.add_argument("--subject", help="only messages on this subject (wildcards allowed)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--seq", type=count, help="only messages below this sequence")
    what.add_argument("--keep", type=count, help="keep this many of the newest messages")
    add_force_flag(p, "purge")
    p.set_defaults(run=purge)

    p = sub.add_parser("get", parents=[common], help="print one stored message")
    p.add_argument("name")
    p.add_argument("seq", nargs="?", type=count, help="its sequence")
    p.add_argument("--last-for", metavar="SUBJECT", help="the last message on SUBJECT instead")
    p.set_defaults(run=get)

    p = sub.add_parser("view", parents=[common], help="print a stream's messages in order")
    p.add_argument("name")
    p.add_argument(
        "--count",
        type=int,
        default=VIEW_DEFAULT,
        help=f"at most this many (default {VIEW_DEFAULT}; 0: all)",
    )
    p.add_argument("--subject", help="only messages on this subject (wildcards allowed)")
    p.add_argument("--since", type=count, metavar="SEQ", help="start at this sequence")
    p.set_defaults(run=view)


_FEATURE_FLAGS = {
    "--allow-msg-ttl": "allow per-message TTLs (Nats-TTL; server 2.11+)",
    "--allow-msg-counter": "a counter stream (counter add|get|ls; server 2.12+)",
    "--allow-atomic": "allow atomic batch publishes (server 2.12+)",
    "--allow-msg-schedules": "allow message schedules (schedule add|ls|rm; server 2.12+)",
    "--allow-batched": "allow fast-ingest batches (pub --fast-batch; server 2.14+)",
}


def _feature_field(flag: str) -> str:
    """The config field (and argparse destination) of a ``--allow-...`` feature flag."""
    return flag.removeprefix("--").replace("-", "_")


def _config_options(p: argparse.ArgumentParser) -> None:
    """The config flags of ``add`` and ``edit`` (left unset when not given)."""
    p.add_argument(
        "--subjects",
        action="append",
        type=subject_list,
        metavar="S[,S...]",
        help="subjects to capture (repeat or comma-separate; add's default: NAME)",
    )
    p.add_argument("--description")
    p.add_argument("--storage", choices=sorted(STORAGE))
    p.add_argument("--retention", choices=sorted(_RETENTION))
    p.add_argument("--discard", choices=sorted(_DISCARD))
    p.add_argument("--max-msgs", type=limit, help="most messages kept (-1: unlimited)")
    p.add_argument("--max-bytes", type=size_limit, help="most bytes kept (e.g. 1GiB; -1)")
    p.add_argument("--max-age", type=duration, help="oldest message kept (e.g. 24h; 0: forever)")
    p.add_argument("--max-msg-size", type=size_limit, help="largest message accepted")
    p.add_argument("--max-msgs-per-subject", type=limit, help="most messages per subject")
    p.add_argument("--dupe-window", type=duration, help="duplicate detection window (e.g. 2m)")
    p.add_argument("--replicas", type=count, help="how many replicas (clustered servers)")
    p.add_argument("--compression", choices=sorted(_COMPRESSION))
    p.add_argument(
        "--allow-direct",
        action="store_true",
        default=None,
        help="allow direct gets (read from any replica)",
    )
    p.add_argument(
        "--allow-rollup", action="store_true", default=None, help="allow Nats-Rollup headers"
    )
    for flag, meaning in _FEATURE_FLAGS.items():
        p.add_argument(flag, action="store_true", default=None, help=meaning)


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields given on the command line."""
    given = {
        "subjects": subjects(args.subjects) or None,
        "description": args.description,
        "storage": STORAGE.get(args.storage or ""),
        "retention": _RETENTION.get(args.retention or ""),
        "discard": _DISCARD.get(args.discard or ""),
        "max_msgs": args.max_msgs,
        "max_bytes": args.max_bytes,
        "max_age": args.max_age,
        "max_msg_size": args.max_msg_size,
        "max_msgs_per_subject": args.max_msgs_per_subject,
        "duplicate_window": args.dupe_window,
        "num_replicas": args.replicas,
        "compression": _COMPRESSION.get(args.compression or ""),
        "allow_direct": args.allow_direct,
        "allow_rollup_hdrs": args.allow_rollup,
        **{_feature_field(flag): getattr(args, _feature_field(flag)) for flag in _FEATURE_FLAGS},
    }
    return {k: v for k, v in given.items() if v is not None}


def config_of(info: StreamInfo) -> StreamConfig:
    """The info's config (the server always sends one).

    Raises:
        CommandError: it did not.
    """
    if info.config is None:
        raise CommandError("the server's stream info has no config")
    return info.config


def describe(info: StreamInfo) -> str:
    """A stream's info for people."""
    cfg, state = config_of(info), info.state

    def lim(value: int | None, unit: str = "") -> str:
        if value is None or value < 0:
            return "unlimited"
        return format_bytes(value) if unit == "bytes" else f"{value:,}"

    lines = [
        f"Stream {cfg.name}" + (f": {cfg.description}" if cfg.description else ""),
        f"  subjects: {', '.join(cfg.subjects or ()) or '(none)'}",
        f"  storage: {format_enum(cfg.storage)}, retention: {format_enum(cfg.retention)}, "
        f"discard: {format_enum(cfg.discard)}, replicas: {cfg.num_replicas or 1}",
        f"  max msgs: {lim(cfg.max_msgs)}, max bytes: {lim(cfg.max_bytes, 'bytes')}, "
        f"max age: {f'{cfg.max_age:g}s' if cfg.max_age else 'unlimited'}, "
        f"max msg size: {lim(cfg.max_msg_size, 'bytes')}",
        f"  created: {format_time(info.created)}",
    ]
    if state is not None:
        lines += [
            "State",
            f"  messages: {state.messages:,} ({format_bytes(state.bytes)})",
            f"  first seq: {state.first_seq}, last seq: {state.last_seq}",
            f"  consumers: {state.consumer_count}",
        ]
    return "\n".join(lines)


def ls(args: argparse.Namespace, out: Output) -> int:
    """List streams (names only with ``--names``)."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        if args.names:
            names = sorted(js.stream_names(subject=args.subject))
            out.result(names, lambda: "\n".join(names) or "no streams")
            return 0
        infos = sorted(js.streams(subject=args.subject), key=lambda i: config_of(i).name)

    def table() -> str:
        if not infos:
            return "no streams"
        rows = [("NAME", "SUBJECTS", "MESSAGES", "BYTES")]
        rows += [
            (
                config_of(i).name,
                ",".join(config_of(i).subjects or ()),
                f"{i.state.messages:,}" if i.state else "0",
                format_bytes(i.state.bytes if i.state else 0),
            )
            for i in infos
        ]
        widths = [max(len(r[c]) for r in rows) for c in range(4)]
        return "\n".join(
            "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
        )

    out.result(infos, table)
    return 0


def info(args: argparse.Namespace, out: Output) -> int:
    """Print a stream's config and state."""
    with session(args) as nc:
        found = nc.jetstream(timeout=args.timeout).stream(args.name).info()
    out.result(found, lambda: describe(found))
    return 0


def add(args: argparse.Namespace, out: Output) -> int:
    """Create a stream (subjects default to its name, as in the nats CLI)."""
    fields = _fields(args)
    fields.setdefault("subjects", [args.name])
    config = StreamConfig(name=args.name, **fields)
    with session(args) as nc:
        created = nc.jetstream(timeout=args.timeout).create_stream(config).info()
    out.result(created, lambda: f"Created stream {args.name}\n{describe(created)}")
    return 0


def edit(args: argparse.Namespace, out: Output) -> int:
    """Change the given fields of a stream's config."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        current = config_of(js.stream(args.name).info())
        updated = js.update_stream(attrs.evolve(current, **_fields(args))).info()
    out.result(updated, lambda: f"Updated stream {args.name}\n{describe(updated)}")
    return 0


def rm(args: argparse.Namespace, out: Output) -> int:
    """Delete a stream."""
    with session(args) as nc:
        nc.jetstream(timeout=args.timeout).delete_stream(args.name)
    out.result({"stream": args.name, "deleted": True}, f"Deleted stream {args.name}")
    return 0


def purge(args: argparse.Namespace, out: Output) -> int:
    """Remove messages; print how many."""
    with session(args) as nc:
        stream = nc.jetstream(timeout=args.timeout).stream(args.name)
        purged = stream.purge(subject=args.subject, seq=args.seq, keep=args.keep)
    out.result(
        {"stream": args.name, "purged": purged}, f"Purged {purged:,} messages from {args.name}"
    )
    return 0


def show_stored(out: Output, msg: Any) -> None:
    """Print a stored message (``RawStreamMsg`` or a consumed ``Msg``)."""
    extra: dict[str, Any] = {}
    if hasattr(msg, "seq"):  # read from the stream
        seq, when = msg.seq, msg.time
    else:  # delivered by a consumer
        meta = msg.metadata
        seq, when = meta.sequence.stream, meta.timestamp
        extra = {
            "consumer_seq": meta.sequence.consumer,
            "delivered": meta.num_delivered,
            "pending": meta.num_pending,
        }
    title = f"[{seq}] {escaped(msg.subject)}" + (f" @ {when.isoformat()}" if when else "")
    if extra:
        title += f" (delivered {extra['delivered']}x, {extra['pending']} pending)"
    out.result(
        message_doc(
            msg.subject,
            msg.data,
            msg.headers,
            seq=seq,
            time=when.isoformat() if when else None,
            **extra,
        ),
        lambda: message_text(title, msg.data, msg.headers),
    )


def get(args: argparse.Namespace, out: Output) -> int:
    """Print the message at SEQ, or the last one on ``--last-for``."""
    if (args.seq is None) == (args.last_for is None):
        raise ValueError("give a sequence or --last-for SUBJECT (one of them)")
    with session(args) as nc:
        stream = nc.jetstream(timeout=args.timeout).stream(args.name)
        # A direct get keeps a subject's bytes; the JSON API has the server replace the bytes
        # that are not UTF-8 with U+FFFD before we see them.
        direct = stream.cached_info is not None and stream.cached_info.config.allow_direct
        if args.seq is not None:
            msg = stream.direct_get(args.seq) if direct else stream.get_msg(args.seq)
        elif direct:
            msg = stream.direct_get_last_for_subject(args.last_for)
        else:
            msg = stream.get_last_msg_for_subject(args.last_for)
    show_stored(out, msg)
    return 0


def view(args: argparse.Namespace, out: Output) -> int:
    """Print messages in sequence order through an ordered consumer (deleted at the end)."""
    if args.count < 0:
        raise ValueError("--count must be 0 (all) or more")
    fields: dict[str, Any] = {}
    if args.subject:
        fields["filter_subjects"] = [args.subject]
    if args.since:
        fields.update(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=args.since)
    shown = 0
    with session(args) as nc:
        stream = nc.jetstream(timeout=args.timeout).stream(args.name)
        state = stream.cached_info.state if stream.cached_info else None
        if state is None or state.messages == 0:
            out.status(f"stream {args.name} has no messages")
            return 0
        with stream.ordered_consumer(**fields) as consumer:
            while not args.count or shown < args.count:
                want = 256 if not args.count else min(256, args.count - shown)
                batch = consumer.fetch_no_wait(want, timeout=args.timeout)
                for msg in batch:
                    show_stored(out, msg)
                shown += len(batch)
                if not batch or batch[-1].metadata.num_pending == 0:
                    break
    if not shown:
        out.status("no messages matched")
    return 0
