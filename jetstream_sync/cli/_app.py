"""The ``jetstream-sync`` parser and entry point: global options, subcommands, exit codes.

Exit codes: 0 success, 1 an error (one line on stderr, no traceback), 2 bad
usage (argparse's message on stderr), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import NatsError
from . import bench, consumer, counter, kv, objects, pubsub, schedule, server, stream
from ._args import positive_duration
from ._connect import add_connection_options, redact
from ._errors import CommandError
from ._output import Output

PROG = "jetstream-sync"
DEFAULT_TIMEOUT = 5.0
COMMAND_MODULES = (server, pubsub, stream, consumer, kv, objects, counter, schedule, bench)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _add_global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Options accepted before and after the subcommand (``suppress``: only when given)."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("output")
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine-readable output: one JSON document per result, "
        "JSON lines for streams of messages",
    )
    group.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=default(None),
        help="always show progress lines on stderr (default: on a terminal)",
    )
    group.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        default=default(None),
        help="never show progress lines",
    )
    group.add_argument(
        "--timeout",
        type=positive_duration,
        metavar="DURATION",
        default=default(DEFAULT_TIMEOUT),
        help=f"seconds (or 2s, 500ms...) for connecting and each request "
        f"(default {DEFAULT_TIMEOUT:g})",
    )
    add_connection_options(parser, suppress)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global options, then one subcommand (group)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A NATS and JetStream command line built on jetstream_sync "
        "(modelled on the nats CLI).",
        epilog="Exit codes: 0 ok, 1 error, 2 bad usage, 130 interrupted.",
    )
    _add_global_options(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_options(common, suppress=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; return its exit code (argparse exits 2 itself on bad usage)."""
    _reopen_closed_streams()
    args = build_parser().parse_args(argv)
    out = Output(args.json)
    try:
        return int(args.run(args, out) or EXIT_OK)
    except KeyboardInterrupt:
        out.status("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (``| head``): say nothing more, on a closed stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except (CommandError, NatsError, OSError, ValueError, TimeoutError) as exc:
        out.status(f"{PROG}: error: {redact(_describe(exc), args)}")
        return EXIT_ERROR
    except Exception as exc:  # still no traceback: a one-line report scripts can log
        out.status(f"{PROG}: error: unexpected {type(exc).__name__}: {redact(str(exc), args)}")
        return EXIT_ERROR


def _reopen_closed_streams() -> None:
    """Put ``/dev/null`` on each standard stream the shell closed (``<&-``, ``>&-``, ``2>&-``).

    Python leaves ``sys.stdin`` (or ``stdout``, ``stderr``) None then; with /dev/null a closed
    stdin is an empty body and a closed output discards, as in the ``nats`` CLI.
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, closefd=False))


def _describe(exc: BaseException) -> str:
    """One line for an error: its message, else its type's name."""
    text = str(exc).strip()
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, TimeoutError) and not text:
        text = "timed out"
    return text.splitlines()[0] if text else type(exc).__name__


def run() -> None:
    """The console script: ``sys.exit(main())``."""
    sys.exit(main())
