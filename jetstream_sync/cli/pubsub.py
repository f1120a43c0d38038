"""Core NATS commands: ``pub``, ``sub``, ``req``, ``reply``.

Bodies and header values are templates: ``{{Count}}`` is the message's number
(from 1), ``{{TimeStamp}}`` the time (RFC 3339), ``{{Unix}}`` / ``{{UnixNano}}``
the Unix time in seconds / nanoseconds, as in the ``nats`` CLI. ``pub`` and
``req`` read the body from stdin for ``-``, or when it is left out and stdin is
a pipe or a file (``_stdin``); a body read from stdin is sent byte for byte.
``pub --fast-batch`` sends one fast-ingest batch (ADR-50): ``--count`` copies of
BODY, or one message per line of stdin.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from ..client import Client
from ..errors import BatchPublishDisabledError
from ..msg import Msg
from ..subscription import Subscription
from ._args import count, header, size
from ._connect import session
from ._errors import CommandError
from ._output import (
    Output,
    Progress,
    format_bytes,
    message_doc,
    message_text,
    quoted,
    text_fields,
    wire_bytes,
)
from ._stdin import STDIN, body_argument, redirected

_TEMPLATE = re.compile(r"\{\{\s*(Count|TimeStamp|Unix|UnixNano)\s*\}\}")


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``pub``, ``sub``, ``req`` and ``reply``."""
    p = commands.add_parser(
        "pub",
        parents=[common],
        help="publish messages",
        description="Publish BODY to SUBJECT, COUNT times.",
    )
    p.add_argument("subject")
    _add_body_argument(p)
    p.add_argument("--count", type=count, help="how many messages (default 1)")
    p.add_argument(
        "--size",
        type=size,
        help="make each body exactly this many bytes (BODY repeated and cut, or 'x's)",
    )
    _add_header_option(p, "a header (repeat for more)")
    p.add_argument("--reply", help="the reply subject to send with each message")
    p.add_argument(
        "-J",
        "--jetstream",
        action="store_true",
        help="publish with JetStream and wait for the stream's acknowledgements",
    )
    p.add_argument(
        "--fast-batch",
        action="store_true",
        help="publish all messages as one JetStream fast-ingest batch (the stream needs "
        "allow_batched): --count copies of BODY, or each line of stdin",
    )
    p.set_defaults(run=pub)

    p = commands.add_parser(
        "sub",
        parents=[common],
        help="subscribe and print messages",
        description="Print the messages published on SUBJECT "
        "(wildcards * and > allowed) until COUNT arrived or Ctrl-C.",
    )
    p.add_argument("subject")
    p.add_argument("--count", type=count, help="stop after this many messages")
    p.add_argument("--queue", help="join this queue group")
    p.add_argument("--raw", action="store_true", help="print only the payloads")
    p.set_defaults(run=sub)

    p = commands.add_parser(
        "req",
        parents=[common],
        help="send a request, print the reply",
        description="Send BODY to SUBJECT and print the reply (waits --timeout seconds).",
    )
    p.add_argument("subject")
    _add_body_argument(p)
    _add_header_option(p, "a header (repeat for more)")
    p.add_argument("--raw", action="store_true", help="print only the reply's payload")
    p.set_defaults(run=req)

    p = commands.add_parser(
        "reply",
        parents=[common],
        help="answer requests with BODY",
        description="Answer each request on SUBJECT with BODY "
        "(or echo it back) until COUNT were answered or Ctrl-C.",
    )
    p.add_argument("subject")
    p.add_argument("body", nargs="?", default="", help="the reply's payload (a template)")
    p.add_argument("--count", type=count, help="stop after answering this many requests")
    p.add_argument("--queue", help="join this queue group")
    p.add_argument(
        "--echo",
        action="store_true",
        help="answer with the request's payload and headers instead of BODY",
    )
    _add_header_option(p, "a header for the replies (repeat for more)")
    p.set_defaults(run=reply)


def _add_body_argument(parser: argparse.ArgumentParser) -> None:
    """Add the optional BODY (a template; ``-`` or left out with stdin redirected: stdin)."""
    parser.add_argument(
        "body",
        nargs="?",
        help="the payload (a template); '-', or none while stdin is a pipe or a file: "
        "read stdin (sent as it is)",
    )


def _add_header_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Add the repeatable ``-H/--header KEY:VALUE`` option (values are templates)."""
    parser.add_argument(
        "-H",
        "--header",
        type=header,
        action="append",
        default=[],
        metavar="KEY:VALUE",
        help=help_text,
    )


def render(template: str, number: int) -> str:
    """Fill in ``{{Count}}``, ``{{TimeStamp}}``, ``{{Unix}}``, ``{{UnixNano}}``."""
    if "{{" not in template:
        return template
    now = time.time_ns()
    values = {
        "Count": str(number),
        "TimeStamp": datetime.fromtimestamp(now / 1e9, UTC).isoformat(),
        "Unix": str(now // 1_000_000_000),
        "UnixNano": str(now),
    }
    return _TEMPLATE.sub(lambda m: values[m[1]], template)


def body(template: str | bytes, number: int, length: int | None = None) -> bytes:
    """The payload of message ``number``; exactly ``length`` bytes when given.

    A ``str`` is a template (bytes of the argument that are not UTF-8 are sent as
    they were given); ``bytes`` (read from stdin) are sent as they are.
    """
    data = template if isinstance(template, bytes) else wire_bytes(render(template, number))
    if length is None:
        return data
    filler = data or b"x"
    return (filler * (length // len(filler) + 1))[:length]


def headers_of(pairs: list[tuple[str, str]], number: int) -> dict[str, list[str]] | None:
    """``--header`` pairs as a multi-valued mapping (values rendered); None when none."""
    found: dict[str, list[str]] = {}
    for key, value in pairs:
        found.setdefault(key, []).append(render(value, number))
    return found or None


def pub(args: argparse.Namespace, out: Output) -> int:
    """Publish ``--count`` messages; print what was sent, and the rate when more than one."""
    if args.reply and (args.jetstream or args.fast_batch):
        raise CommandError(
            f"--reply cannot be used with {'--fast-batch' if args.fast_batch else '--jetstream'}"
            " (the stream's ack is the reply)"
        )
    if args.fast_batch:
        return _pub_fast_batch(args, out)
    if args.count is None:
        args.count = 1
    args.body = body_argument(args.body)
    with session(args) as nc:
        check_size(nc, args.size)
        if args.jetstream:
            return _pub_jetstream(nc, args, out)
        sent, progress = _publish_each(
            args,
            out,
            lambda data, headers: nc.publish(args.subject, data, reply=args.reply, headers=headers),
        )
        nc.flush(timeout=args.timeout)
        if args.count > 1:
            progress.done()
    _report_pub(args, out, sent, progress.elapsed(), None)
    return 0


def check_size(nc: Client, length: int | None) -> None:
    """Refuse a ``--size`` the server would refuse, before a body that large is built.

    Raises:
        CommandError: ``length`` is more than the server's ``max_payload``.
    """
    if length is not None and length > nc.max_payload:
        raise CommandError(
            f"--size {length:,} bytes: the server accepts at most {nc.max_payload:,}"
        )


def _pub_jetstream(nc: Client, args: argparse.Namespace, out: Output) -> int:
    """Publish with acknowledgements (async publishes, all awaited)."""
    js = nc.jetstream(timeout=args.timeout)
    futures: list[Any] = []
    sent, progress = _publish_each(
        args,
        out,
        lambda data, headers: futures.append(js.publish_async(args.subject, data, headers=headers)),
    )
    acks = [f.result(timeout=args.timeout) for f in futures]
    if args.count > 1:
        progress.done()
    _report_pub(args, out, sent, progress.elapsed(), acks[-1])
    return 0


def _pub_fast_batch(args: argparse.Namespace, out: Output) -> int:
    """Publish ``--count`` copies of BODY, or each line of stdin, as one fast batch."""
    from_stdin = args.body == STDIN or (args.body is None and redirected())
    if from_stdin and args.count is not None:
        raise CommandError(
            "--count cannot be used with --fast-batch reading stdin (each line is a message)"
        )
    total = None if from_stdin else (args.count or 1)
    bodies: Iterable[bytes]
    if from_stdin:
        bodies = (body(line, n, args.size) for n, line in enumerate(stdin_lines(), 1))
    else:
        assert total is not None
        bodies = (body(args.body or "", n, args.size) for n in range(1, total + 1))
    with session(args) as nc:
        check_size(nc, args.size)
        js = nc.jetstream(timeout=args.timeout)
        progress = out.progress(f"pub {args.subject}", total, args.progress, "msgs")
        number = sent = 0
        with js.fast_batch(timeout=args.timeout) as batch:
            for number, data in enumerate(bodies, 1):
                try:
                    batch.add(args.subject, data, headers_of(args.header, number))
                except BatchPublishDisabledError as exc:
                    raise CommandError(
                        f"{exc}: --fast-batch needs a stream with allow_batched (server 2.14+)"
                    ) from exc
                sent += len(data)
                progress.update(1)
            if number == 0:
                raise CommandError("stdin has no lines: nothing to publish")
            ack = batch.commit()
        if number > 1:
            progress.done()
    args.count = number
    _report_pub(args, out, sent, progress.elapsed(), ack)
    return 0


def stdin_lines() -> Iterator[bytes]:
    """Each line of stdin as bytes, without its line ending (``\\n`` or ``\\r\\n``).

    Read as the lines come (a pipe may deliver them over hours); a last line
    without a newline counts, an empty line is an empty message.
    """
    for line in sys.stdin.buffer:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


def _publish_each(
    args: argparse.Namespace,
    out: Output,
    send: Callable[[bytes, dict[str, list[str]] | None], object],
) -> tuple[int, Progress]:
    """Render message 1 to ``--count`` and hand each to ``send(data, headers)``.

    Returns:
        The number of payload bytes sent and the (not yet done) progress line.
    """
    progress = out.progress(f"pub {args.subject}", args.count, args.progress, "msgs")
    sent = 0
    for number in range(1, args.count + 1):
        data = body(args.body, number, args.size)
        send(data, headers_of(args.header, number))
        sent += len(data)
        if args.count > 1:
            progress.update(1)
    return sent, progress


def _report_pub(args: argparse.Namespace, out: Output, sent: int, seconds: float, ack: Any) -> None:
    """One result line: what went where, the rate for more than one message."""
    doc: dict[str, Any] = {**text_fields("subject", args.subject), "count": args.count}
    doc["bytes"] = sent
    text = f"Published {format_bytes(sent)} to {quoted(args.subject)}"
    if args.count > 1:
        rate = args.count / seconds
        doc.update(seconds=round(seconds, 6), msgs_per_sec=round(rate, 1))
        text = (
            f"Published {args.count:,} messages ({format_bytes(sent)}) to "
            f"{quoted(args.subject)} in {seconds:.2f}s: {rate:,.0f} msgs/s, "
            f"{format_bytes(sent / seconds)}/s"
        )
    if ack is not None and ack.batch_id is not None:  # a fast batch's commit
        doc.update(stream=ack.stream, seq=ack.seq, batch_id=ack.batch_id)
        doc["batch_size"] = ack.batch_size
        text += f" (stream {ack.stream}, last seq {ack.seq}, batch of {ack.batch_size})"
    elif ack is not None:
        doc.update(stream=ack.stream, seq=ack.seq, duplicate=ack.duplicate)
        text += f" (stream {ack.stream}, last seq {ack.seq})"
    out.result(doc, text)


def listen(nc: Client, args: argparse.Namespace, out: Output) -> Subscription:
    """Subscribe, make sure the server has the interest, and say so on stderr."""
    subscription = nc.subscribe(args.subject, queue=args.queue)
    nc.flush(timeout=args.timeout)
    where = f" in queue group {quoted(args.queue)}" if args.queue else ""
    out.status(f"Listening on {quoted(args.subject)}{where}")
    return subscription


def messages(subscription: Subscription, limit: int | None) -> Iterator[tuple[int, Msg]]:
    """``(number, msg)`` until ``limit`` messages (forever when None)."""
    number = 0
    while limit is None or number < limit:
        msg = subscription.next_msg(timeout=None)
        number += 1
        yield number, msg


def show(out: Output, number: int, msg: Msg, raw: bool = False) -> None:
    """Print one received message (a JSON line with ``--json``)."""
    if raw and not out.json:
        out.raw(msg.data + b"\n")
        return
    title = f"[#{number}] Received on {quoted(msg.subject)}"
    if msg.reply:
        title += f" with reply {quoted(msg.reply)}"
    out.result(
        message_doc(msg.subject, msg.data, msg.headers, reply=msg.reply),
        lambda: message_text(title, msg.data, msg.headers),
    )


def sub(args: argparse.Namespace, out: Output) -> int:
    """Print messages until ``--count`` arrived (or Ctrl-C)."""
    with session(args) as nc:
        subscription = listen(nc, args, out)
        for number, msg in messages(subscription, args.count):
            show(out, number, msg, args.raw)
    return 0


def req(args: argparse.Namespace, out: Output) -> int:
    """Send one request and print the reply."""
    args.body = body_argument(args.body)
    with session(args) as nc:
        started = time.monotonic()
        msg = nc.request(
            args.subject,
            body(args.body, 1),
            timeout=args.timeout,
            headers=headers_of(args.header, 1),
        )
        rtt = time.monotonic() - started
    out.status(f"Received with rtt {rtt * 1000:.3f}ms")
    if args.raw and not out.json:
        out.raw(msg.data + b"\n")
        return 0
    out.result(
        message_doc(msg.subject, msg.data, msg.headers, rtt_ms=round(rtt * 1000, 3)),
        lambda: message_text(f"Reply on {quoted(msg.subject)}", msg.data, msg.headers),
    )
    return 0


def reply(args: argparse.Namespace, out: Output) -> int:
    """Answer requests until ``--count`` were answered (or Ctrl-C)."""
    with session(args) as nc:
        subscription = listen(nc, args, out)
        for number, msg in messages(subscription, args.count):
            show(out, number, msg)
            if not msg.reply:
                out.status(f"[#{number}] has no reply subject: not answered")
                continue
            if args.echo:
                msg.respond(msg.data, headers=msg.headers)
            else:
                msg.respond(body(args.body, number), headers=headers_of(args.header, number))
        nc.flush(timeout=args.timeout)
    return 0
