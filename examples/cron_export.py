"""Export what is new on a JetStream stream to a JSON-lines file, from cron.

Each run reads the messages a durable pull consumer has not yet delivered,
appends them to ``--out`` (one JSON object per line), ``fsync``\\ s the file,
and only then acknowledges them, so a crash or a full disk never loses a
message: what was not acknowledged is delivered again on the next run. The
consumer is created on the first run. A second run with nothing new writes
nothing and exits 0.

    */10 * * * *  NATS_URL=nats://nats.internal:4222 python cron_export.py \\
                  --stream ORDERS --durable orders-export --out /var/lib/export/orders.jsonl

Exit status: 0 when done (also when there was nothing new); 1 with one line
on stderr when the server cannot be reached, the stream does not exist, or
anything else failed (nothing was acknowledged that was not written).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import jetstream_sync as js

BATCH = 500
CONNECT_TIMEOUT = 2.0
# Longer than writing and syncing one batch can take, so nothing is redelivered mid-run.
ACK_WAIT = 60.0


def without_credentials(url: str) -> str:
    """``url`` without ``user:pass@`` or ``token@``, fit for a message."""
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def record(msg: js.Msg) -> dict:
    """The JSON-lines record of one message: where it sits in the stream, and its payload."""
    meta = msg.metadata
    line = {"seq": meta.sequence.stream, "subject": msg.subject, "time": meta.timestamp.isoformat()}
    try:
        line["data"] = json.loads(msg.data)
    except ValueError:  # not JSON (or not UTF-8): keep the exact bytes
        line["data_base64"] = base64.b64encode(msg.data).decode()
    return line


def append_synced(path: Path, lines: list[dict]) -> None:
    """Append ``lines`` to ``path`` and return only once they are on disk."""
    created = not path.exists()
    with path.open("a", encoding="utf-8") as out:
        out.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        out.flush()
        os.fsync(out.fileno())
    if created:  # the new directory entry must survive a crash too
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def consumer_for(ctx: js.JetStreamContext, stream: str, durable: str) -> js.Consumer:
    """The durable pull consumer ``durable`` on ``stream``; created when missing."""
    try:
        return ctx.consumer(stream, durable)
    except js.ConsumerNotFoundError:
        return ctx.create_consumer(
            stream, durable_name=durable, ack_policy=js.AckPolicy.EXPLICIT, ack_wait=ACK_WAIT
        )


def export(ctx: js.JetStreamContext, args: argparse.Namespace) -> int:
    """Write and acknowledge every new message, batch by batch; return how many."""
    consumer = consumer_for(ctx, args.stream, args.durable)
    total = 0
    while True:
        msgs = consumer.fetch_no_wait(args.batch)
        if not msgs:
            return total
        append_synced(args.out, [record(m) for m in msgs])
        for msg in msgs[:-1]:
            msg.ack()
        # Acks travel in order on one connection: the server confirming the
        # last one means every ack before it has arrived too.
        msgs[-1].ack_sync()
        total += len(msgs)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, export, and return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--stream", required=True)
    parser.add_argument("--durable", required=True, help="the durable consumer's name")
    parser.add_argument("--out", required=True, type=Path, help="the JSON-lines file to append to")
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args(argv)
    try:
        nc = js.connect(args.server, connect_timeout=CONNECT_TIMEOUT, allow_reconnect=False)
    except (js.NoServersError, js.AuthorizationError) as exc:
        reason = "credentials rejected" if isinstance(exc, js.AuthorizationError) else "unreachable"
        print(
            f"cron_export: cannot connect to {without_credentials(args.server)} ({reason})",
            file=sys.stderr,
        )
        return 1
    try:
        with nc:
            count = export(nc.jetstream(), args)
    except js.StreamNotFoundError:
        print(f"cron_export: stream {args.stream!r} does not exist", file=sys.stderr)
        return 1
    except (js.NatsError, OSError) as exc:
        print(f"cron_export: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"exported {count} messages to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
