"""``bench``: a quick throughput measurement against ``--server``, or the project's suite.

By default it measures core NATS publish and subscribe throughput between two
connections (``--jetstream``: acknowledged async publishes into a temporary
memory stream, deleted afterwards) — like ``nats bench``, and it works
against any server. ``--suite`` runs the project's benchmark suite instead
(``python -m benchmarks --quick``: every client and scenario on servers of
its own), which needs a checkout of the repository (the ``benchmarks``
package importable).
"""

from __future__ import annotations

import argparse
import importlib.util
import secrets
import sys
import time
from typing import Any

from ..client import Client
from ..jetstream.enums import StorageType
from ._args import count, size
from ._connect import session
from ._errors import CommandError
from ._output import Output, format_bytes
from .pubsub import check_size

DEFAULT_MSGS = 100_000
DEFAULT_SIZE = 128
_SUBS_BATCH = 1024


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``bench``."""
    p = commands.add_parser(
        "bench",
        parents=[common],
        help="measure throughput",
        description="Publish --msgs messages of --size bytes and "
        "receive them on a second connection; print the rates.",
    )
    p.add_argument("subject", nargs="?", help="the subject (default: a random one)")
    p.add_argument(
        "--msgs",
        type=count,
        default=DEFAULT_MSGS,
        help=f"how many messages (default {DEFAULT_MSGS:,})",
    )
    p.add_argument(
        "--size", type=size, default=DEFAULT_SIZE, help=f"payload bytes (default {DEFAULT_SIZE})"
    )
    p.add_argument(
        "-J",
        "--jetstream",
        action="store_true",
        help="acknowledged publishes into a temporary memory stream",
    )
    p.add_argument(
        "--suite",
        action="store_true",
        help="run the project's quick benchmark suite (python -m benchmarks --quick)",
    )
    p.set_defaults(run=bench)


def bench(args: argparse.Namespace, out: Output) -> int:
    """Run the built-in measurement, or the project's suite with ``--suite``."""
    if args.suite:
        return suite()
    subject = args.subject or f"bench.{secrets.token_hex(6)}"
    with session(args) as pub_nc:
        check_size(pub_nc, args.size)
        payload = b"x" * args.size
        if args.jetstream:
            doc = _jetstream(pub_nc, subject, payload, args, out)
        else:
            with session(args) as sub_nc:
                doc = _core(pub_nc, sub_nc, subject, payload, args, out)
    lines = [
        f"{name}: {r['msgs']:,} msgs of {args.size} B in {r['seconds']:.3f}s: "
        f"{r['msgs_per_sec']:,.0f} msgs/s, {format_bytes(r['bytes_per_sec'])}/s"
        for name, r in doc.items()
        if isinstance(r, dict)
    ]
    out.result(doc, lambda: "\n".join(lines))
    return 0


def _rate(msgs: int, size_: int, seconds: float) -> dict[str, Any]:
    seconds = max(seconds, 1e-9)
    return {
        "msgs": msgs,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(msgs / seconds, 1),
        "bytes_per_sec": round(msgs * size_ / seconds, 1),
    }


def _core(
    pub_nc: Client,
    sub_nc: Client,
    subject: str,
    payload: bytes,
    args: argparse.Namespace,
    out: Output,
) -> dict[str, Any]:
    """Publish on one connection, receive on another; time both sides."""
    subscription = sub_nc.subscribe(subject)
    sub_nc.flush(timeout=args.timeout)
    progress = out.progress(f"bench {subject}", args.msgs, args.progress, "msgs")
    started = time.monotonic()
    for _ in range(args.msgs):
        pub_nc.publish(subject, payload)
        progress.update(1)
    pub_nc.flush(timeout=args.timeout)
    published = time.monotonic() - started
    received = 0
    try:
        while received < args.msgs:
            received += len(subscription.next_msgs(_SUBS_BATCH, timeout=args.timeout))
    except TimeoutError:
        raise CommandError(
            f"only {received:,} of {args.msgs:,} messages arrived (slow consumer?)"
        ) from None
    progress.done()
    return {
        "subject": subject,
        "size": args.size,
        "pub": _rate(args.msgs, args.size, published),
        "sub": _rate(received, args.size, time.monotonic() - started),
    }


def _jetstream(
    nc: Client, subject: str, payload: bytes, args: argparse.Namespace, out: Output
) -> dict[str, Any]:
    """Async publishes into a temporary memory stream; all acks awaited; the stream deleted."""
    js = nc.jetstream(timeout=args.timeout)
    stream = f"BENCH_{secrets.token_hex(6).upper()}"
    js.create_stream(name=stream, subjects=[subject], storage=StorageType.MEMORY)
    try:
        progress = out.progress(f"bench {subject}", args.msgs, args.progress, "msgs")
        started = time.monotonic()
        for _ in range(args.msgs):
            js.publish_async(subject, payload)
            progress.update(1)
        js.publish_async_completed(timeout=args.timeout)
        seconds = time.monotonic() - started
        progress.done()
        stored = js.stream(stream).info().state
    finally:
        js.delete_stream(stream)
    if stored is None or stored.messages != args.msgs:
        raise CommandError(
            f"the stream holds {stored.messages if stored else 0:,} of {args.msgs:,} messages"
        )
    return {
        "subject": subject,
        "size": args.size,
        "stream": stream,
        "js_pub": _rate(args.msgs, args.size, seconds),
    }


def suite() -> int:
    """Run ``python -m benchmarks --quick`` (its output is the report); 0 when it passed.

    Raises:
        CommandError: the ``benchmarks`` package is not importable.
    """
    import subprocess  # here: only --suite starts a process

    if importlib.util.find_spec("benchmarks") is None:
        raise CommandError(
            "--suite needs the project's benchmarks package: run it from a "
            "checkout of the jetstream_sync repository (or drop --suite)"
        )
    completed = subprocess.run([sys.executable, "-m", "benchmarks", "--quick"], check=False)
    return 0 if completed.returncode == 0 else 1
