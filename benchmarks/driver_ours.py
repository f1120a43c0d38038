"""jetstream_sync through its public API, one scenario per process.

``python -m benchmarks.driver_ours --port P --scenario S --n N [--size B]``

Consumer scenarios (S3/S4/S7/MEM) report an "unavailable" row instead of failing while
the consumer API is not in the installed package.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import jetstream_sync as js_sync

from . import (
    BATCH,
    OBJ_BUCKET,
    S8_THREADS,
    SERVICE,
    STREAM,
    SUBJECT,
    SUBJECTS,
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
from .kv_prefill import BUCKET, KEYS

CLIENT = "ours"


def _enum(name: str) -> Any:
    """An enum from the package top level, else from ``jetstream_sync.jetstream.enums``."""
    found = getattr(js_sync, name, None)
    if found is None:
        from jetstream_sync.jetstream import enums

        found = getattr(enums, name)
    return found


StorageType = _enum("StorageType")
AckPolicy = _enum("AckPolicy")


def ensure_stream(js: Any, storage: str) -> None:
    """Create stream "S" on ``bench.>`` (already there is fine)."""
    kind = StorageType.MEMORY if storage == "memory" else StorageType.FILE
    try:
        js.create_stream(name=STREAM, subjects=SUBJECTS, storage=kind)
    except js_sync.StreamNameInUseError:
        pass


def publish_sync(js: Any, label: str, n: int, size: int, storage: str) -> None:
    """S1: ``js.publish`` blocks for each PubAck."""
    ensure_stream(js, storage)
    payload = b"x" * size
    publish = js.publish
    publish(SUBJECT, payload)  # warm-up
    with Timed() as t:
        for _ in range(n):
            publish(SUBJECT, payload)
    emit(result(CLIENT, label, n, size, t))


def publish_async(js: Any, label: str, n: int, size: int, storage: str, window: int) -> None:
    """S2/S6: ``js.publish_async`` with ``max_ack_inflight=window``, then wait for all."""
    ensure_stream(js, storage)
    payload = b"x" * size
    js.publish_async(SUBJECT, payload)  # warm-up: creates the ack subscription
    js.publish_async_completed(timeout=30)
    futures = []
    keep = futures.append
    publish = js.publish_async
    with Timed() as t:
        for _ in range(n):
            keep(publish(SUBJECT, payload))
        js.publish_async_completed(timeout=300)
    errors = sum(1 for f in futures if f.exception(timeout=0) is not None)
    emit(result(CLIENT, label, n, size, t, window=window, errors=errors))


def fast_batch(js: Any, label: str, n: int, size: int, storage: str) -> None:
    """FASTB: one ``js.fast_batch()`` of ``n`` messages, then its commit."""
    if not hasattr(js, "fast_batch"):
        unavailable(CLIENT, label, "this version has no fast_batch")
        return
    kind = StorageType.MEMORY if storage == "memory" else StorageType.FILE
    js.create_stream(name=STREAM, subjects=SUBJECTS, storage=kind, allow_batched=True)
    payload = b"x" * size
    with js.fast_batch() as warm:  # warm-up: the first batch's subscription and round trip
        warm.add(SUBJECT, payload)
        warm.commit()
    with Timed() as t:
        with js.fast_batch(timeout=60) as batch:
            add = batch.add
            for _ in range(n):
                add(SUBJECT, payload)
            ack = batch.commit()
    emit(result(CLIENT, label, n, size, t, errors=n - (ack.batch_size or 0)))


def consumer_api_missing(js: Any, method: str) -> str | None:
    """Why a consumer scenario cannot run yet (the API is still being written), or None."""
    if not hasattr(js, "create_consumer"):
        return "JetStreamContext.create_consumer is not implemented yet"
    try:
        from jetstream_sync.jetstream.consumer import Consumer
    except ImportError:
        return "jetstream_sync.jetstream.consumer.Consumer is not implemented yet"
    if not hasattr(Consumer, method):
        return f"Consumer.{method} is not implemented yet"
    return None


def make_consumer(js: Any, durable: str, explicit: bool) -> Any:
    policy = AckPolicy.EXPLICIT if explicit else AckPolicy.NONE
    return js.create_consumer(STREAM, durable_name=durable, ack_policy=policy)


def fetch_loop(nc: Any, js: Any, label: str, n: int, size: int, explicit: bool) -> None:
    """S3/S4: ``fetch(500)`` until ``n`` messages arrived; ``ack()`` each for S3.

    S3B: ``ack_batch()`` of each fetched batch instead (one write per batch).
    """
    batch_ack = getattr(js_sync, "ack_batch", None) if label == "S3B" else None
    if label == "S3B" and batch_ack is None:
        unavailable(CLIENT, label, "jetstream_sync.ack_batch is not implemented yet")
        return
    consumer = make_consumer(js, "DOURS", explicit)
    got = 0
    empty = 0
    with Timed() as t:
        while got < n:
            msgs = consumer.fetch(min(BATCH, n - got), timeout=5)
            if not msgs:
                empty += 1
                if empty == 3:
                    raise RuntimeError(f"fetch returned nothing three times at {got}/{n}")
                continue
            if batch_ack is not None:
                batch_ack(msgs)
            elif explicit:
                for m in msgs:
                    m.ack()
            got += len(msgs)
        nc.flush(timeout=30)  # the last acks reached the server
    emit(result(CLIENT, label, got, size, t))


def consume_callback(nc: Any, js: Any, label: str, n: int, size: int) -> None:
    """S7: ``consumer.consume(cb)``; the callback acks; stop after ``n`` messages."""
    consumer = make_consumer(js, "DOURS7", True)
    count = [0]
    done = threading.Event()

    def on_msg(m: Any) -> None:
        m.ack()
        count[0] += 1
        if count[0] == n:
            done.set()

    ctx = None
    try:
        with Timed() as t:
            ctx = consumer.consume(on_msg, max_messages=BATCH)
            if not done.wait(300):
                raise RuntimeError(f"consume() delivered {count[0]}/{n} in 300 s")
            nc.flush(timeout=30)
    finally:
        if ctx is not None:
            ctx.stop()
    emit(result(CLIENT, label, n, size, t))


def iterate_memory(nc: Any, js: Any, label: str, n: int, size: int) -> None:
    """MEM: RSS growth (peak minus before) over ``n`` messages from ``messages()`` + ack."""
    consumer = make_consumer(js, "DOURSM", True)
    gc.collect()
    before = rss_mb()
    reset_peak_rss()
    got = 0
    it = consumer.messages(max_messages=BATCH)
    try:
        with Timed() as t:
            for m in it:
                m.ack()
                got += 1
                if got >= n:
                    break
            nc.flush(timeout=30)
    finally:
        it.stop()
    peak = max(peak_rss_mb(), before)
    emit(result(CLIENT, label, got, size, t, rss_mb=round(peak - before, 2),
                rss_before_mb=round(before, 2), rss_peak_mb=round(peak, 2)))  # fmt: skip


def latency(
    nc: Any, js: Any, label: str, n: int, size: int, storage: str, inline: bool = True
) -> None:
    """S5: ``nc.request`` to an in-process responder; then three JetStream API calls.

    The responder's callback is inline (``subscribe(..., inline=True)``: it runs on
    the thread that read the request), or with ``inline=False`` (``--responder
    thread``) on the subscription's own thread. S5info: ``stream.info()``; S5cinfo:
    ``consumer.info()``; S5ccreate: ``js.create_consumer`` of an existing durable
    with the same config.
    """
    subscribe_responder(nc, b"x" * size, inline)
    requests(nc, label, n, size)

    ensure_stream(js, storage)
    ni = max(1, n // 5)
    stream = js.stream_no_info(STREAM)
    consumer = make_consumer(js, "DINFO", True)
    calls = (
        ("S5info", stream.info),
        ("S5cinfo", consumer.info),
        ("S5ccreate", lambda: make_consumer(js, "DCREATE", True)),  # the same config again
    )
    for row, call in calls:
        call()  # warm-up
        t, lat = timed_calls(call, ni)
        emit(result(CLIENT, row, ni, 0, t, **latency_fields(lat)))


def timed_calls(call: Callable[[], object], n: int) -> tuple[Timed, list[float]]:
    """Call ``call()`` ``n`` times, timed: the section, and each call's latency in us."""
    lat: list[float] = []
    record = lat.append
    clock = time.perf_counter_ns
    with Timed() as t:
        for _ in range(n):
            t0 = clock()
            call()
            record((clock() - t0) / 1000)
    return t, lat


def subscribe_responder(nc: Any, payload: bytes, inline: bool) -> None:
    """Answer every request on the service subject with ``payload``."""
    nc.subscribe(SERVICE, cb=lambda m: m.respond(payload), inline=inline)
    nc.flush(timeout=5)


def requests(nc: Any, label: str, n: int, size: int) -> None:
    """100 requests to warm up, then ``n`` timed ones: the row ``label``."""
    payload = b"x" * size
    request = nc.request

    def call() -> object:
        return request(SERVICE, payload, timeout=2)

    timed_calls(call, 100)
    t, lat = timed_calls(call, n)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


def serve(nc: Any, size: int) -> None:
    """S5x's responder: an inline callback answers each request, until stdin closes."""
    subscribe_responder(nc, b"x" * size, inline=True)
    print("ready", flush=True)
    wait_for_stdin_to_close()


def latency_remote(nc: Any, label: str, n: int, size: int, port: int) -> None:
    """S5x: ``nc.request`` to this client's responder in another process (:func:`serve`)."""
    with responder_process("driver_ours", port, size):
        requests(nc, label, n, size)


def web_server(js: Any, label: str, seconds: int, size: int, storage: str) -> None:
    """S8: 16 threads share the client, each repeating ``js.publish`` (one PubAck a call)."""
    ensure_stream(js, storage)
    payload = b"x" * size
    js.publish(SUBJECT, payload)  # warm-up
    t, n, lat = run_threads(S8_THREADS, seconds, lambda i: lambda: js.publish(SUBJECT, payload))
    emit(result(CLIENT, label, n, size, t, threads=S8_THREADS, **latency_fields(lat)))


def kv_ops(js: Any, label: str, n: int, size: int, get: bool) -> None:
    """KVput / KVget: ``kv.put`` / ``kv.get`` one after another over 1,000 keys."""
    kv = js.create_key_value(bucket=BUCKET)
    payload = b"x" * size
    keys = [f"k{i}" for i in range(KEYS)]
    for key in keys:
        kv.put(key, payload)
    op = kv.get if get else (lambda key: kv.put(key, payload))
    lat = []
    record = lat.append
    clock = time.perf_counter_ns
    with Timed() as t:
        for i in range(n):
            t0 = clock()
            op(keys[i % KEYS])
            record((clock() - t0) / 1000)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


def kv_watch(js: Any, label: str, n: int, size: int) -> None:
    """KVwatch: a watcher delivers the prefilled bucket's ``n`` keys, up to the None marker."""
    kv = js.key_value(BUCKET)
    got = 0
    with Timed() as t:
        with kv.watch() as watcher:
            for entry in watcher:
                if entry is None:
                    break
                got += 1
    if got != n:
        raise RuntimeError(f"the watcher delivered {got} of {n} keys")
    emit(result(CLIENT, label, got, size, t))


class _Sink:
    """A writer that counts and drops what it is given (OBJget measures the client)."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)


def object_store(js: Any, label: str, n: int, size: int, get: bool) -> None:
    """OBJput: ``put`` of a ``size``-byte object, ``n`` times; OBJget: ``get_into`` a sink."""
    obs = js.create_object_store(bucket=OBJ_BUCKET)
    data = bytes(size)
    obs.put("warm-up", data[: 1 << 20])
    obs.get("warm-up")
    if get:
        obs.put("big", data)
        with Timed() as t:
            for _ in range(n):
                sink = _Sink()
                obs.get_into("big", sink)
                if sink.n != size:
                    raise RuntimeError(f"get_into wrote {sink.n} of {size} bytes")
    else:
        with Timed() as t:
            for _ in range(n):
                obs.put("big", data)
    emit(result(CLIENT, label, n, size, t))


def main(argv: list[str] | None = None) -> None:
    args, sc = driver_args(argv)
    nc = js_sync.connect(f"nats://127.0.0.1:{args.port}")
    try:
        js = nc.jetstream(max_ack_inflight=args.window)
        method = {"S3": "fetch", "S4": "fetch", "S7": "consume", "MEM": "messages"}.get(sc.base)
        if method is not None:
            missing = consumer_api_missing(js, method)
            if missing:
                unavailable(CLIENT, args.label, missing)
                return
        if sc.base == "S1":
            publish_sync(js, args.label, args.n, args.size, args.storage)
        elif sc.base == "S2":
            publish_async(js, args.label, args.n, args.size, args.storage, args.window)
        elif sc.base in ("S3", "S4"):
            fetch_loop(nc, js, args.label, args.n, args.size, sc.base == "S3")
        elif sc.base == "S7":
            consume_callback(nc, js, args.label, args.n, args.size)
        elif sc.base == "MEM":
            iterate_memory(nc, js, args.label, args.n, args.size)
        elif sc.base == "S5":
            latency(nc, js, args.label, args.n, args.size, args.storage, args.responder == "inline")
        elif sc.base == "S5x" and args.serve:
            serve(nc, args.size)
        elif sc.base == "S5x":
            latency_remote(nc, args.label, args.n, args.size, args.port)
        elif sc.base == "S8":
            web_server(js, args.label, args.n, args.size, args.storage)
        elif sc.base in ("KVput", "KVget"):
            kv_ops(js, args.label, args.n, args.size, sc.base == "KVget")
        elif sc.base == "KVwatch":
            kv_watch(js, args.label, args.n, args.size)
        elif sc.base in ("OBJput", "OBJget"):
            object_store(js, args.label, args.n, args.size, sc.base == "OBJget")
        elif sc.base == "FASTB":
            fast_batch(js, args.label, args.n, args.size, args.storage)
    finally:
        nc.close()


if __name__ == "__main__":
    main()
