"""``kv ls|info|add|get|put|del|history|watch|rm``: Key-Value buckets.

``kv put BUCKET KEY`` without a VALUE reads the value from stdin. Values are
printed as text (``--raw``: the bytes only); in JSON, ``value`` is the text, or
``value_b64`` when it is not UTF-8.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from ..kv import KeyValueConfig, KeyValueEntry, KeyValueStatus
from ._args import STORAGE, add_force_flag, count, duration, size_limit
from ._connect import session
from ._output import Output, escaped, format_bytes, payload, text_fields, wire_bytes


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``kv`` command group."""
    group = commands.add_parser("kv", help="Key-Value buckets")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("ls", parents=[common], help="list buckets, or a bucket's keys")
    p.add_argument("bucket", nargs="?", help="list this bucket's keys instead")
    p.set_defaults(run=ls)

    p = sub.add_parser("info", parents=[common], help="a bucket's status")
    p.add_argument("bucket")
    p.set_defaults(run=info)

    p = sub.add_parser("add", parents=[common], help="create a bucket")
    p.add_argument("bucket")
    p.add_argument("--history", type=count, default=1, help="revisions kept per key (1-64)")
    p.add_argument("--ttl", type=duration, help="how long values are kept (e.g. 1h; 0: forever)")
    p.add_argument("--storage", choices=sorted(STORAGE), default="file")
    p.add_argument("--replicas", type=count, default=1)
    p.add_argument("--max-value-size", type=size_limit, help="largest value (e.g. 1MiB)")
    p.add_argument("--max-bucket-size", type=size_limit, help="most bytes in the bucket")
    p.add_argument("--description")
    p.set_defaults(run=add)

    p = sub.add_parser("get", parents=[common], help="print a key's value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--revision", type=count, help="this revision instead of the latest")
    p.add_argument("--raw", action="store_true", help="print only the value's bytes")
    p.set_defaults(run=get)

    p = sub.add_parser("put", parents=[common], help="set a key's value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?", help="the value (default: read stdin)")
    p.set_defaults(run=put)

    p = sub.add_parser("del", parents=[common], help="delete a key (a delete marker)")
    p.add_argument("bucket")
    p.add_argument("key")
    p.set_defaults(run=delete)

    p = sub.add_parser("history", parents=[common], help="every kept revision of a key")
    p.add_argument("bucket")
    p.add_argument("key")
    p.set_defaults(run=history)

    p = sub.add_parser("watch", parents=[common], help="print current values, then updates")
    p.add_argument("bucket")
    p.add_argument("key", nargs="?", default=">", help="a key or filter (default: every key)")
    p.add_argument("--count", type=count, help="stop after this many entries")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--updates-only", action="store_true", help="skip the current values")
    start.add_argument(
        "--revision", type=count, help="instead, every revision from this one on, then updates"
    )
    p.set_defaults(run=watch)

    p = sub.add_parser("rm", parents=[common], help="delete a bucket")
    p.add_argument("bucket")
    add_force_flag(p)
    p.set_defaults(run=rm)


def entry_doc(entry: KeyValueEntry) -> dict[str, Any]:
    """An entry as a JSON document."""
    doc: dict[str, Any] = {
        "bucket": entry.bucket,
        **text_fields("key", entry.key),
        "revision": entry.revision,
        "created": entry.created.isoformat(),
        "delta": entry.delta,
        "operation": entry.operation.value,
    }
    doc.update(payload("value", entry.value))
    return doc


def entry_text(entry: KeyValueEntry) -> str:
    """An entry for people: ``bucket > key revision N (PUT) @ time: value``."""
    head = f"{entry.bucket} > {escaped(entry.key)} revision {entry.revision}"
    head += f" ({entry.operation.value}) @ {entry.created.isoformat()}"
    if entry.operation.value != "PUT":
        return head
    return f"{head}\n{entry.value.decode('utf-8', errors='backslashreplace')}"


def status_doc(status: KeyValueStatus) -> dict[str, Any]:
    """A bucket's status as a JSON document."""
    cfg = status.config
    return {
        "bucket": status.bucket,
        "values": status.values,
        "history": status.history,
        "ttl": status.ttl,
        "bytes": status.bytes,
        "storage": cfg.storage,
        "replicas": cfg.replicas,
        "compressed": status.is_compressed,
        "metadata": status.metadata,
    }


def status_text(status: KeyValueStatus) -> str:
    """A bucket's status for people."""
    ttl = f"{status.ttl:g}s" if status.ttl else "forever"
    return (
        f"Bucket {status.bucket}: {status.values:,} values, {format_bytes(status.bytes)}, "
        f"history {status.history}, ttl {ttl}"
    )


def ls(args: argparse.Namespace, out: Output) -> int:
    """List buckets, or a bucket's keys."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        if args.bucket:
            keys = sorted(js.key_value(args.bucket).keys())
            out.result(keys, lambda: "\n".join(map(escaped, keys)) or "no keys")
            return 0
        found = sorted(js.key_values(), key=lambda s: s.bucket)
    out.result(
        [status_doc(s) for s in found], lambda: "\n".join(map(status_text, found)) or "no buckets"
    )
    return 0


def info(args: argparse.Namespace, out: Output) -> int:
    """Print a bucket's status."""
    with session(args) as nc:
        status = nc.jetstream(timeout=args.timeout).key_value(args.bucket).status()
    out.result(status_doc(status), lambda: status_text(status))
    return 0


def add(args: argparse.Namespace, out: Output) -> int:
    """Create a bucket."""
    config = KeyValueConfig(
        bucket=args.bucket,
        history=args.history,
        ttl=args.ttl or None,
        storage=STORAGE[args.storage],
        replicas=args.replicas,
        max_value_size=args.max_value_size,
        max_bytes=args.max_bucket_size,
        description=args.description,
    )
    with session(args) as nc:
        status = nc.jetstream(timeout=args.timeout).create_key_value(config).status()
    out.result(status_doc(status), lambda: f"Created {status_text(status)}")
    return 0


def get(args: argparse.Namespace, out: Output) -> int:
    """Print a key's value (latest, or ``--revision``)."""
    with session(args) as nc:
        bucket = nc.jetstream(timeout=args.timeout).key_value(args.bucket)
        entry = bucket.get(args.key, revision=args.revision)
    if args.raw and not out.json:
        out.raw(entry.value)
        return 0
    out.result(entry_doc(entry), lambda: entry_text(entry))
    return 0


def put(args: argparse.Namespace, out: Output) -> int:
    """Set a key (the value from stdin when not given); print the revision."""
    value = wire_bytes(args.value) if args.value is not None else sys.stdin.buffer.read()
    with session(args) as nc:
        revision = nc.jetstream(timeout=args.timeout).key_value(args.bucket).put(args.key, value)
    out.result(
        {"bucket": args.bucket, **text_fields("key", args.key), "revision": revision},
        f"{args.bucket} > {escaped(args.key)} revision {revision}",
    )
    return 0


def delete(args: argparse.Namespace, out: Output) -> int:
    """Delete a key (its history stays until purged)."""
    with session(args) as nc:
        revision = nc.jetstream(timeout=args.timeout).key_value(args.bucket).delete(args.key)
    out.result(
        {"bucket": args.bucket, **text_fields("key", args.key), "revision": revision}
        | {"deleted": True},
        f"Deleted {args.bucket} > {escaped(args.key)} (revision {revision})",
    )
    return 0


def history(args: argparse.Namespace, out: Output) -> int:
    """Print every kept revision of a key, oldest first."""
    with session(args) as nc:
        entries = nc.jetstream(timeout=args.timeout).key_value(args.bucket).history(args.key)
    out.result([entry_doc(e) for e in entries], lambda: "\n".join(map(entry_text, entries)))
    return 0


def watch(args: argparse.Namespace, out: Output) -> int:
    """Print the current entries, then every update, until ``--count`` entries (or Ctrl-C)."""
    seen = 0
    with session(args) as nc:
        bucket = nc.jetstream(timeout=args.timeout).key_value(args.bucket)
        with bucket.watch(
            args.key, updates_only=args.updates_only, resume_from_revision=args.revision
        ) as watcher:
            out.status(f"Watching {args.bucket} > {escaped(args.key)}")
            while args.count is None or seen < args.count:
                entry = watcher.next(timeout=None)
                if entry is None:  # the current values are all delivered
                    continue
                seen += 1
                out.result(entry_doc(entry), functools.partial(entry_text, entry))
    return 0


def rm(args: argparse.Namespace, out: Output) -> int:
    """Delete a bucket."""
    with session(args) as nc:
        nc.jetstream(timeout=args.timeout).delete_key_value(args.bucket)
    out.result({"bucket": args.bucket, "deleted": True}, f"Deleted bucket {args.bucket}")
    return 0
