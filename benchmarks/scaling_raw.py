"""One point of a scaling curve over plain sockets with hand-written frames: the raw limit.

``python -m benchmarks.scaling_raw --port P --curve threads|subs|payload|batch --x X --n N``
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Callable

from . import STREAM, SUBJECT, Timed, emit, latency_fields, run_threads
from ._wire import INBOX, RawConn, create_durable, create_stream
from .prefill import pipelined_publish
from .scaling import SIZE, point_args, point_row, process_rss_bytes

CLIENT = "raw"


def threads(port: int, args: Namespace) -> None:
    """``args.x`` threads, each with its own socket: one PUB, then wait for its PubAck."""
    setup = RawConn(port)
    create_stream(setup, "file")
    payload = b"x" * SIZE
    conns: list[RawConn] = []

    def connect(i: int) -> Callable[[], None]:
        conn = RawConn(port, inbox=b"%s%d" % (INBOX, i))
        conns.append(conn)
        frame = b"PUB %s %s %d\r\n%s\r\n" % (SUBJECT.encode(), conn.reply, SIZE, payload)
        send, pump = conn.sock.sendall, conn.pump

        def one() -> None:
            send(frame)
            while not pump():
                pass

        return one

    try:
        t, n, lat = run_threads(args.x, args.n, connect)
    finally:
        for conn in [setup, *conns]:
            conn.close()
    emit(point_row(CLIENT, args, n, SIZE, t, **latency_fields(lat)))


def subscriptions(conn: RawConn, args: Namespace) -> None:
    """``args.x`` SUBs on one socket; rounds of PUBs over them, each round counted back."""
    k = args.x
    frames = [b"PUB scale.%d %d\r\n%s\r\n" % (i, SIZE, b"x" * SIZE) for i in range(k)]
    server0 = process_rss_bytes(args.server_pid)
    conn.send(b"".join(b"SUB scale.%d %d\r\n" % (i, i + 2) for i in range(k)))
    conn.api("$JS.API.INFO")  # a round trip: the server has every SUB
    server1 = process_rss_bytes(args.server_pid)
    per_sub = max(1, 1000 // k)
    rounds = int(args.n) // (per_sub * k)
    burst = b"".join(frames) * per_sub
    send, pump = conn.send, conn.pump
    with Timed() as t:
        for _ in range(rounds):
            send(burst)
            got = 0
            while got < per_sub * k:
                got += pump()
    emit(point_row(CLIENT, args, rounds * per_sub * k, SIZE, t,
                   server_rss_bytes_per_sub=round((server1 - server0) / k)))  # fmt: skip


def publish_window(conn: RawConn, args: Namespace) -> None:
    """Payload curve, publish: pre-encoded PUBs of ``args.x`` bytes, ``depth`` acks in flight."""
    create_stream(conn, "file")
    n = int(args.n)
    with Timed() as t:
        pipelined_publish(conn, n, args.x, args.depth)
    emit(point_row(CLIENT, args, n, args.x, t))


def fetch_all(conn: RawConn, args: Namespace, size: int) -> None:
    """Pull the prefilled stream ``depth`` messages a request (AckNone), one request open."""
    create_durable(conn, "SCALE", "none")
    n, batch = int(args.n), args.depth
    body = json.dumps({"batch": batch, "expires": 10_000_000_000}).encode()
    next_req = b"PUB $JS.API.CONSUMER.MSG.NEXT.%s.SCALE %s.f %d\r\n%s\r\n" % (
        STREAM.encode(), INBOX, len(body), body
    )  # fmt: skip
    data_subject = SUBJECT.encode()
    state = {"got": 0}

    def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if subj == data_subject:  # status messages arrive on the inbox: not data
            state["got"] += 1

    requested = 0
    with Timed() as t:
        while state["got"] < n:
            if requested <= state["got"]:
                conn.send(next_req)
                requested += batch
            conn.pump(on_msg)
    emit(point_row(CLIENT, args, state["got"], size, t))


def main(argv: list[str] | None = None) -> None:
    """Measure the point the command line names; print its JSON row."""
    args = point_args(argv)
    if args.curve == "threads":
        threads(args.port, args)
        return
    conn = RawConn(args.port)
    try:
        if args.curve == "subs":
            subscriptions(conn, args)
        elif args.curve == "payload" and args.mode == "publish":
            publish_window(conn, args)
        elif args.curve == "payload":
            fetch_all(conn, args, args.x)
        else:
            fetch_all(conn, args, SIZE)
    finally:
        conn.close()


if __name__ == "__main__":
    main()
