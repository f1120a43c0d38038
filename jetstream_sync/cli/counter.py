"""``counter add|get|ls``: distributed counters (ADR-49) of a counter stream.

Totals are printed as decimal integers of any size; in JSON they are strings of digits
(``"value"``), as the server sends them, so no JSON reader rounds them.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import DirectGetNotAllowedError
from ..jetstream.counter import CounterEntry, format_value, parse_value
from ._connect import session
from ._errors import CommandError
from ._output import Output, escaped, text_fields


def _delta(text: str) -> int:
    try:
        return parse_value(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"an increment is an integer, got {text!r}") from None


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``counter`` command group."""
    group = commands.add_parser("counter", help="distributed counters (counter streams)")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("add", parents=[common], help="add to a counter; print the new total")
    p.add_argument("stream")
    p.add_argument("subject")
    p.add_argument("delta", nargs="?", type=_delta, default=1, help="the increment (default 1)")
    p.set_defaults(run=add)

    p = sub.add_parser("get", parents=[common], help="a counter's total and last increment")
    p.add_argument("stream")
    p.add_argument("subject")
    p.set_defaults(run=get)

    p = sub.add_parser("ls", parents=[common], help="every counter matching a filter")
    p.add_argument("stream")
    p.add_argument("filter", nargs="?", default=">", help="a subject filter (default: all)")
    p.set_defaults(run=ls)


def entry_doc(entry: CounterEntry) -> dict[str, Any]:
    """A counter as a JSON document (numbers as strings of digits)."""
    return {
        **text_fields("subject", entry.subject),
        "value": format_value(entry.value),
        "increment": None if entry.increment is None else format_value(entry.increment),
        "sources": {
            s: {k: format_value(v) for k, v in m.items()} for s, m in entry.sources.items()
        },
    }


def entry_text(entry: CounterEntry) -> str:
    """A counter for people: ``subject: total``."""
    return f"{escaped(entry.subject)}: {format_value(entry.value)}"


def add(args: argparse.Namespace, out: Output) -> int:
    """Add the increment; print the new total."""
    with session(args) as nc:
        counter = nc.jetstream(timeout=args.timeout).counter(args.stream)
        total = counter.add(args.subject, args.delta)
    out.result(
        {**text_fields("subject", args.subject), "value": format_value(total)},
        f"{escaped(args.subject)}: {format_value(total)}",
    )
    return 0


def get(args: argparse.Namespace, out: Output) -> int:
    """Print one counter."""
    with session(args) as nc:
        entry = nc.jetstream(timeout=args.timeout).counter(args.stream).get(args.subject)
    out.result(entry_doc(entry), lambda: entry_text(entry))
    return 0


def ls(args: argparse.Namespace, out: Output) -> int:
    """Print every counter matching the filter, by subject."""
    with session(args) as nc:
        counter = nc.jetstream(timeout=args.timeout).counter(args.stream)
        try:
            entries = sorted(counter.get_many(args.filter), key=lambda e: e.subject)
        except DirectGetNotAllowedError:
            raise CommandError(
                f"stream {args.stream!r} does not allow direct get, which counter ls reads "
                f"with: allow it with 'jetstream-sync stream edit {args.stream} --allow-direct'"
            ) from None
    out.result(
        [entry_doc(e) for e in entries],
        lambda: "\n".join(map(entry_text, entries)) or "no counters",
    )
    return 0
