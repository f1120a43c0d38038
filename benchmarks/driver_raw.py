"""The raw limit: every scenario over a plain socket with hand-written frames.

``python -m benchmarks.driver_raw --port P --scenario S --n N [--size B]``

Everything a real client adds (message objects, futures, locks, JSON decoding of acks,
per-call encoding) is left out, so this approximates the best a Python process can do
on the machine. Consumers use one pull request at a time for S3/S4 (like a fetch loop)
and keep two outstanding for S7/MEM (like a pre-buffering consume()).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable

from . import (
    BATCH,
    S8_THREADS,
    SERVICE,
    STREAM,
    SUBJECT,
    Timed,
    driver_args,
    emit,
    latency_fields,
    peak_rss_mb,
    reset_peak_rss,
    responder_process,
    result,
    rss_mb,
    run_threads,
    unavailable,
    wait_for_stdin_to_close,
)
from ._wire import INBOX, REPLY, RawConn, create_durable, create_stream, durable_body
from .kv_prefill import BUCKET, KEYS, KV_STREAM, create_bucket, key_subject, prefill_kv
from .prefill import pipelined_publish

CLIENT = "raw"


def publish_sync(conn: RawConn, label: str, n: int, size: int, storage: str) -> None:
    """S1: one PUB, then wait for its PubAck."""
    create_stream(conn, storage)
    frame = b"PUB %s %s %d\r\n%s\r\n" % (SUBJECT.encode(), REPLY, size, b"x" * size)
    send, pump = conn.sock.sendall, conn.pump
    with Timed() as t:
        for _ in range(n):
            send(frame)
            while not pump():
                pass
    emit(result(CLIENT, label, n, size, t))


def publish_pipelined(conn: RawConn, label: str, n: int, size: int, storage: str, window: int):
    """S2/S6: pre-encoded PUB frames, at most ``window`` acks outstanding."""
    create_stream(conn, storage)
    with Timed() as t:
        pipelined_publish(conn, n, size, window)
    emit(result(CLIENT, label, n, size, t, window=window))


def pull(conn: RawConn, n: int, explicit: bool, outstanding: int) -> int:
    """Consume ``n`` messages with pull requests of ``BATCH``; ack each when ``explicit``.

    Acks ("PUB <reply> 0") are coalesced per receive. ``outstanding`` pull requests are
    kept open. Returns the messages consumed.
    """
    durable = "DRAW"
    create_durable(conn, durable, "explicit" if explicit else "none")
    body = json.dumps({"batch": BATCH, "expires": 5_000_000_000}).encode()
    next_req = b"PUB $JS.API.CONSUMER.MSG.NEXT.%s.%s %s.f %d\r\n%s\r\n" % (
        STREAM.encode(), durable.encode(), INBOX, len(body), body
    )  # fmt: skip
    acks: list[bytes] = []
    state = {"got": 0}
    data_subject = SUBJECT.encode()

    def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if subj == data_subject:  # status messages arrive on the inbox: not data
            state["got"] += 1
            if explicit and reply is not None:
                acks.append(b"PUB %s 0\r\n\r\n" % reply)

    requested = 0
    send, pump = conn.send, conn.pump
    while True:
        # a new request goes out once no more than (outstanding - 1) batches are open
        while requested < n and requested - state["got"] <= (outstanding - 1) * BATCH:
            send(next_req)
            requested += BATCH
        if state["got"] >= n:
            break
        pump(on_msg)
        if acks:
            send(b"".join(acks))
            acks.clear()
    return state["got"]


def fast_batch(conn: RawConn, label: str, n: int, size: int, storage: str) -> None:
    """FASTB: one ADR-50 fast-ingest batch, hand-framed, two acks' worth in flight."""
    cfg = {"name": STREAM, "subjects": ["bench.>"], "storage": storage, "allow_batched": True}
    conn.api(f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
    head = conn.reply + b".fb.500.fail."
    subject, payload = SUBJECT.encode(), b"x" * size
    state = {"acked": 0, "window": 0, "pub_ack": b""}

    def on_reply(subj: bytes, reply: bytes | None, data: bytes) -> None:
        body = json.loads(data)
        if body.get("type") == "ack":
            state["acked"] = max(state["acked"], body["seq"])
            state["window"] = 2 * body["msgs"]
        elif "type" not in body:
            state["pub_ack"] = data

    def frame(seq: int, op: int, data: bytes) -> bytes:
        reply = head + b"%d.%d.$FI" % (seq, op)
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(data), data)

    with Timed() as t:
        conn.send(frame(1, 0, payload))
        while not state["window"]:
            conn.pump(on_reply)
        seq = 1
        while seq < n:
            limit = min(n, state["acked"] + state["window"])
            if seq >= limit:
                conn.pump(on_reply)
                continue
            conn.send(b"".join(frame(s, 1, payload) for s in range(seq + 1, limit + 1)))
            seq = limit
        conn.send(frame(n + 1, 3, b""))
        while not state["pub_ack"]:
            conn.pump(on_reply)
    count = json.loads(state["pub_ack"]).get("count", 0)
    emit(result(CLIENT, label, n, size, t, errors=n - count))


def consume(conn: RawConn, label: str, n: int, size: int, explicit: bool, outstanding: int):
    """S3/S4/S7: pull from the prefilled stream."""
    with Timed() as t:
        got = pull(conn, n, explicit, outstanding)
    emit(result(CLIENT, label, got, size, t, outstanding=outstanding))


def memory(conn: RawConn, label: str, n: int, size: int) -> None:
    """MEM: RSS growth while consuming ``n`` messages (two pulls open, explicit acks)."""
    gc.collect()
    before = rss_mb()
    reset_peak_rss()
    with Timed() as t:
        got = pull(conn, n, True, 2)
    peak = max(peak_rss_mb(), before)
    emit(result(CLIENT, label, got, size, t, rss_mb=round(peak - before, 2),
                rss_before_mb=round(before, 2), rss_peak_mb=round(peak, 2)))  # fmt: skip


def latency(conn: RawConn, label: str, n: int, size: int, storage: str) -> None:
    """S5: request/reply through an in-process responder on the same socket; then the
    raw requests of S5info (stream info), S5cinfo (consumer info) and S5ccreate
    (consumer create of an existing durable with the same config)."""
    create_stream(conn, storage)
    payload = b"x" * size
    conn.send(b"SUB %s 2\r\n" % SERVICE.encode())
    request = b"PUB %s %s %d\r\n%s\r\n" % (SERVICE.encode(), REPLY, size, payload)
    response = b"PUB %s %d\r\n%s\r\n" % (REPLY, size, payload)
    done = [False]
    service = SERVICE.encode()

    def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if subj == service:
            conn.send(response)  # the responder
        else:
            done[0] = True

    def one() -> float:
        done[0] = False
        t0 = time.perf_counter_ns()
        conn.send(request)
        while not done[0]:
            conn.pump(on_msg)
        return (time.perf_counter_ns() - t0) / 1000

    for _ in range(100):
        one()
    with Timed() as t:
        lat = [one() for _ in range(n)]
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))

    ni = max(1, n // 5)
    create_durable(conn, "DINFO", "explicit")
    create_body = durable_body("DCREATE", "explicit")
    calls = (
        ("S5info", lambda: conn.api(f"$JS.API.STREAM.INFO.{STREAM}")),
        ("S5cinfo", lambda: conn.api(f"$JS.API.CONSUMER.INFO.{STREAM}.DINFO")),
        ("S5ccreate", lambda: conn.api(f"$JS.API.CONSUMER.CREATE.{STREAM}.DCREATE", create_body)),
    )
    for row, call in calls:
        call()  # warm-up
        lat = []
        with Timed() as t:
            for _ in range(ni):
                t0 = time.perf_counter_ns()
                call()
                lat.append((time.perf_counter_ns() - t0) / 1000)
        emit(result(CLIENT, row, ni, 0, t, **latency_fields(lat)))


def web_server(port: int, label: str, seconds: int, size: int, storage: str) -> None:
    """S8: 16 threads, each with its own socket: one PUB, then wait for its PubAck."""
    setup = RawConn(port)
    create_stream(setup, storage)
    payload = b"x" * size
    conns: list[RawConn] = []

    def connect(i: int) -> Callable[[], None]:
        conn = RawConn(port, inbox=b"%s%d" % (INBOX, i))  # its own inbox: its own acks only
        conns.append(conn)
        frame = b"PUB %s %s %d\r\n%s\r\n" % (SUBJECT.encode(), conn.reply, size, payload)
        send, pump = conn.sock.sendall, conn.pump

        def one() -> None:
            send(frame)
            while not pump():
                pass

        return one

    try:
        t, n, lat = run_threads(S8_THREADS, seconds, connect)
    finally:
        for conn in [setup, *conns]:
            conn.close()
    emit(result(CLIENT, label, n, size, t, threads=S8_THREADS, **latency_fields(lat)))


def kv_ops(conn: RawConn, port: int, label: str, n: int, size: int, get: bool) -> None:
    """KVput / KVget: one PUB to a key (or one direct-get request), then wait for the reply."""
    create_bucket(conn)
    prefill_kv(port, KEYS, size)
    payload = b"x" * size
    if get:
        frames = [b"PUB $JS.API.DIRECT.GET.%s.%s %s 0\r\n\r\n" % (KV_STREAM.encode(),
                  key_subject(i), REPLY) for i in range(KEYS)]  # fmt: skip
    else:
        frames = [b"PUB %s %s %d\r\n%s\r\n" % (key_subject(i), REPLY, size, payload)
                  for i in range(KEYS)]  # fmt: skip
    send, pump = conn.sock.sendall, conn.pump
    lat = []
    clock = time.perf_counter_ns
    with Timed() as t:
        for i in range(n):
            t0 = clock()
            send(frames[i % KEYS])
            while not pump():
                pass
            lat.append((clock() - t0) / 1000)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


def kv_watch(conn: RawConn, label: str, n: int, size: int) -> None:
    """KVwatch: an ack-none consumer delivering last per subject, pulled 1,000 at a time."""
    body = {"stream_name": KV_STREAM, "config": {
        "name": "W", "ack_policy": "none", "deliver_policy": "last_per_subject",
        "filter_subject": f"$KV.{BUCKET}.>", "mem_storage": True, "num_replicas": 1,
    }}  # fmt: skip
    req = json.dumps({"batch": 1000, "expires": 5_000_000_000}).encode()
    next_req = b"PUB $JS.API.CONSUMER.MSG.NEXT.%s.W %s.w %d\r\n%s\r\n" % (
        KV_STREAM.encode(), INBOX, len(req), req
    )  # fmt: skip
    prefix = b"$KV."
    state = {"got": 0}

    def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if subj.startswith(prefix):
            state["got"] += 1

    with Timed() as t:
        conn.api(f"$JS.API.CONSUMER.CREATE.{KV_STREAM}.W.$KV.{BUCKET}.>", body)
        requested = 0
        while state["got"] < n:
            while requested < n and requested - state["got"] <= 1000:
                conn.send(next_req)
                requested += 1000
            conn.pump(on_msg)
    emit(result(CLIENT, label, state["got"], size, t))


def serve(port: int, size: int) -> None:
    """S5x's responder: answers each request as its frame is walked, until stdin closes.

    Its own inbox, so that the requester's replies (on the default inbox) never reach it.
    """
    conn = RawConn(port, inbox=b"_INBOX.responder")
    payload = b"x" * size
    conn.send(b"SUB %s 2\r\nPING\r\n" % SERVICE.encode())
    while conn._line() != b"PONG":  # the server has the SUB
        pass

    def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if reply is not None:
            conn.send(b"PUB %s %d\r\n%s\r\n" % (reply, size, payload))

    def stop() -> None:
        wait_for_stdin_to_close()
        os._exit(0)  # the main thread is blocked in recv(): end the process at once

    threading.Thread(target=stop, daemon=True).start()
    print("ready", flush=True)
    while True:
        conn.pump(on_msg)


def latency_remote(conn: RawConn, label: str, n: int, size: int, port: int) -> None:
    """S5x: a request at a time to the raw responder in another process (:func:`serve`)."""
    payload = b"x" * size
    clock = time.perf_counter_ns
    with responder_process("driver_raw", port, size):
        for _ in range(100):
            conn.request(SERVICE, payload)
        lat = []
        with Timed() as t:
            for _ in range(n):
                t0 = clock()
                conn.request(SERVICE, payload)
                lat.append((clock() - t0) / 1000)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


def main(argv: list[str] | None = None) -> None:
    args, sc = driver_args(argv)
    if sc.base == "S5x" and args.serve:
        serve(args.port, args.size)
        return
    conn = RawConn(args.port)
    try:
        if sc.base == "S1":
            publish_sync(conn, args.label, args.n, args.size, args.storage)
        elif sc.base == "S2":
            publish_pipelined(conn, args.label, args.n, args.size, args.storage, args.window)
        elif sc.base in ("S3", "S4"):
            consume(conn, args.label, args.n, args.size, sc.base == "S3", 1)
        elif sc.base == "S7":
            consume(conn, args.label, args.n, args.size, True, 2)
        elif sc.base == "MEM":
            memory(conn, args.label, args.n, args.size)
        elif sc.base == "S5":
            latency(conn, args.label, args.n, args.size, args.storage)
        elif sc.base == "S5x":
            latency_remote(conn, args.label, args.n, args.size, args.port)
        elif sc.base == "S8":
            web_server(args.port, args.label, args.n, args.size, args.storage)
        elif sc.base in ("KVput", "KVget"):
            kv_ops(conn, args.port, args.label, args.n, args.size, sc.base == "KVget")
        elif sc.base == "KVwatch":
            kv_watch(conn, args.label, args.n, args.size)
        elif sc.base.startswith("OBJ"):
            unavailable(CLIENT, args.label, "the raw driver has no Object Store")
        elif sc.base == "FASTB":
            fast_batch(conn, args.label, args.n, args.size, args.storage)
    finally:
        conn.close()


if __name__ == "__main__":
    main()
