"""One point of a scaling curve through jetstream_sync's public API.

``python -m benchmarks.scaling_ours --port P --curve threads|subs|payload|batch --x X --n N``
"""

from __future__ import annotations

import gc
import tracemalloc
from argparse import Namespace
from typing import Any

import jetstream_sync as js_sync

from . import SUBJECT, Timed, emit, latency_fields, rss_mb, run_threads
from .driver_ours import AckPolicy, ensure_stream
from .scaling import SIZE, point_args, point_row, process_rss_bytes

CLIENT = "ours"


def threads(js: Any, args: Namespace) -> None:
    """``args.x`` threads repeat ``js.publish`` (one PubAck each) for ``args.n`` seconds."""
    ensure_stream(js, "file")
    payload = b"x" * SIZE
    js.publish(SUBJECT, payload)  # warm-up
    t, n, lat = run_threads(args.x, args.n, lambda i: lambda: js.publish(SUBJECT, payload))
    emit(point_row(CLIENT, args, n, SIZE, t, **latency_fields(lat)))


def subscriptions(nc: Any, args: Namespace) -> None:
    """``args.x`` subscriptions; messages published round robin over them, every one received.

    Memory per subscription: the client's RSS growth over subscribing (no tracemalloc
    running), the server's RSS growth once it has them all, and, after the timed part
    and an unsubscribe of all, what tracemalloc sees a fresh set of as many cost.
    """
    k, payload = args.x, b"x" * SIZE
    subjects = [f"scale.{i}" for i in range(k)]
    gc.collect()
    rss0, server0 = rss_mb(), process_rss_bytes(args.server_pid)
    subs = [nc.subscribe(s) for s in subjects]
    nc.flush(timeout=30)
    rss1, server1 = rss_mb(), process_rss_bytes(args.server_pid)
    per_sub = max(1, 1000 // k)  # messages each subscription gets per round
    rounds = int(args.n) // (per_sub * k)
    publish = nc.publish
    with Timed() as t:
        for _ in range(rounds):
            for _ in range(per_sub):
                for subject in subjects:
                    publish(subject, payload)
            for sub in subs:
                left = per_sub
                while left:
                    left -= len(sub.next_msgs(left, timeout=30))
    for sub in subs:
        sub.unsubscribe()
    nc.flush(timeout=30)
    del subs
    gc.collect()
    tracemalloc.start()
    again = [nc.subscribe(f"again.{i}") for i in range(k)]
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del again
    n = rounds * per_sub * k
    emit(point_row(CLIENT, args, n, SIZE, t,
                   rss_bytes_per_sub=round((rss1 - rss0) * 1e6 / k),
                   traced_bytes_per_sub=round(traced / k),
                   server_rss_bytes_per_sub=round((server1 - server0) / k)))  # fmt: skip


def publish_window(nc: Any, args: Namespace) -> None:
    """Payload curve, publish: ``publish_async`` of ``args.x`` bytes, ``depth`` acks in flight."""
    js = nc.jetstream(max_ack_inflight=args.depth)
    ensure_stream(js, "file")
    payload, n = b"x" * args.x, int(args.n)
    js.publish_async(SUBJECT, payload)  # warm-up: creates the ack subscription
    js.publish_async_completed(timeout=30)
    futures = []
    keep, publish = futures.append, js.publish_async
    with Timed() as t:
        for _ in range(n):
            keep(publish(SUBJECT, payload))
        js.publish_async_completed(timeout=300)
    errors = sum(1 for f in futures if f.exception(timeout=0) is not None)
    emit(point_row(CLIENT, args, n, args.x, t, errors=errors))


def fetch_all(js: Any, args: Namespace, size: int) -> None:
    """Fetch the prefilled stream in batches of ``depth`` (AckNone) until ``n`` arrived."""
    consumer = js.create_consumer("S", durable_name="SCALE", ack_policy=AckPolicy.NONE)
    n, batch, got, empty = int(args.n), args.depth, 0, 0
    fetch = consumer.fetch
    with Timed() as t:
        while got < n:
            msgs = fetch(min(batch, n - got), timeout=10)
            if not msgs:
                empty += 1
                if empty == 3:
                    raise RuntimeError(f"fetch returned nothing three times at {got}/{n}")
            got += len(msgs)
    emit(point_row(CLIENT, args, got, size, t))


def main(argv: list[str] | None = None) -> None:
    """Measure the point the command line names; print its JSON row."""
    args = point_args(argv)
    nc = js_sync.connect(f"nats://127.0.0.1:{args.port}")
    try:
        if args.curve == "threads":
            threads(nc.jetstream(), args)
        elif args.curve == "subs":
            subscriptions(nc, args)
        elif args.curve == "payload" and args.mode == "publish":
            publish_window(nc, args)
        elif args.curve == "payload":
            fetch_all(nc.jetstream(), args, args.x)
        else:
            fetch_all(nc.jetstream(), args, SIZE)
    finally:
        nc.close()


if __name__ == "__main__":
    main()
