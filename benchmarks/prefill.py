"""Fill stream "S" fast over a raw pipelined connection, so every client consumes the same data.

``python -m benchmarks.prefill --port P --n N [--size B] [--storage file|memory]``

The same pipelined publisher is the raw limit's S2/S6: identical PUB frames with a reply
subject, written in chunks while a reader thread counts the PubAcks, never more than
``window`` acks outstanding.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from . import STREAM, SUBJECT, WINDOW
from ._wire import REPLY, RawConn, create_stream


def pipelined_publish(
    conn: RawConn, n: int, size: int, window: int = WINDOW, check: bool = False
) -> int:
    """Publish ``n`` messages of ``size`` bytes to ``bench.s``; return the count of acks.

    Blocks until every PubAck is back. With ``check``, a reply that is an API error
    (not a PubAck) raises ``RuntimeError`` after the run; without, replies are only
    counted (the raw limit does no per-message work).
    """
    frame = b"PUB %s %s %d\r\n%s\r\n" % (SUBJECT.encode(), REPLY, size, b"x" * size)
    per_chunk = max(1, min(1000, window // 4, (256 << 10) // len(frame)))
    chunk = frame * per_chunk
    state = {"acked": 0, "errors": 0, "failure": None}
    cond = threading.Condition()

    def on_ack(subj: bytes, reply: bytes | None, data: bytes) -> None:
        if b'"error"' in data or data.startswith(b"NATS/1.0"):
            state["errors"] += 1

    handler = on_ack if check else None

    def reader() -> None:
        try:
            acked = 0
            while acked < n:
                got = conn.pump(handler)
                if got:
                    acked += got
                    with cond:
                        state["acked"] = acked
                        cond.notify()
        except BaseException as e:  # report to the publishing thread
            with cond:
                state["failure"] = e
                cond.notify()

    thread = threading.Thread(target=reader, name="bench-raw-acks", daemon=True)
    thread.start()
    sent = 0
    while sent < n:
        k = min(per_chunk, n - sent)
        with cond:
            while sent + k - state["acked"] > window and state["failure"] is None:
                cond.wait(1.0)
        if state["failure"] is not None:
            raise state["failure"]
        conn.send(chunk if k == per_chunk else frame * k)
        sent += k
    thread.join()
    if state["failure"] is not None:
        raise state["failure"]
    if state["errors"]:
        raise RuntimeError(f"{state['errors']} publishes were refused")
    return state["acked"]


def prefill(port: int, n: int, size: int = 128, storage: str = "file") -> dict[str, float]:
    """Create stream "S" and store ``n`` messages in it; return how long it took."""
    conn = RawConn(port)
    try:
        create_stream(conn, storage, STREAM)
        t0 = time.perf_counter()
        acked = pipelined_publish(conn, n, size, check=True)
        secs = time.perf_counter() - t0
    finally:
        conn.close()
    return {"n": acked, "secs": round(secs, 3), "msgs_per_s": round(acked / secs, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--storage", choices=("file", "memory"), default="file")
    a = ap.parse_args()
    sys.stdout.write(json.dumps(prefill(a.port, a.n, a.size, a.storage)) + "\n")


if __name__ == "__main__":
    main()
