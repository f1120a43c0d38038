"""nats-py (asyncio), the official Python client, running the same scenarios.

``python -m benchmarks.driver_natspy --port P --scenario S --n N [--size B]``

S3/S4/MEM use a durable pull subscription and ``fetch(500)``; S7 uses a push
subscription with a callback that acks (nats-py has no pull-based consume()).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

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

CLIENT = "nats-py"


async def ensure_stream(js: Any, storage: str) -> None:
    from nats.js.api import StorageType, StreamConfig

    kind = StorageType.MEMORY if storage == "memory" else StorageType.FILE
    await js.add_stream(StreamConfig(name=STREAM, subjects=SUBJECTS, storage=kind))


async def publish_sync(js: Any, label: str, n: int, size: int, storage: str) -> None:
    """S1: ``await js.publish`` for each message."""
    await ensure_stream(js, storage)
    payload = b"x" * size
    await js.publish(SUBJECT, payload)  # warm-up
    with Timed() as t:
        for _ in range(n):
            await js.publish(SUBJECT, payload)
    emit(result(CLIENT, label, n, size, t))


async def publish_async(js: Any, label: str, n: int, size: int, storage: str, window: int):
    """S2/S6: ``js.publish_async`` bounded by ``publish_async_max_pending=window``."""
    await ensure_stream(js, storage)
    payload = b"x" * size
    await js.publish_async(SUBJECT, payload)  # warm-up: creates the ack subscription
    await js.publish_async_completed()
    futures = []
    keep = futures.append
    with Timed() as t:
        for _ in range(n):
            keep(await js.publish_async(SUBJECT, payload))
        await asyncio.wait_for(js.publish_async_completed(), 300)
    errors = sum(1 for f in futures if f.exception() is not None)
    emit(result(CLIENT, label, n, size, t, window=window, errors=errors))


async def fast_batch(nc: Any, label: str, n: int, size: int, storage: str) -> None:
    """FASTB: nats-py has no fast ingest; an ADR-50 batch over its core publish and an
    inbox subscription (two acks' worth in flight), what a user would write."""
    import json

    cfg = {"name": STREAM, "subjects": ["bench.>"], "storage": storage, "allow_batched": True}
    await nc.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps(cfg).encode(), timeout=10)
    inbox = nc.new_inbox()
    head = f"{inbox}.500.fail."
    state = {"acked": 0, "window": 0}
    moved = asyncio.Event()
    done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def on_reply(msg: Any) -> None:
        body = json.loads(msg.data)
        if body.get("type") == "ack":
            state["acked"] = max(state["acked"], body["seq"])
            state["window"] = 2 * body["msgs"]
            moved.set()
        elif "type" not in body and not done.done():
            done.set_result(body)

    sub = await nc.subscribe(f"{inbox}.>", cb=on_reply)
    payload = b"x" * size
    with Timed() as t:
        await nc.publish(SUBJECT, payload, reply=f"{head}1.0.$FI")
        for seq in range(2, n + 1):
            while seq > state["acked"] + state["window"]:
                moved.clear()
                await asyncio.wait_for(moved.wait(), 30)
            await nc.publish(SUBJECT, payload, reply=f"{head}{seq}.1.$FI")
        await nc.publish(SUBJECT, b"", reply=f"{head}{n + 1}.3.$FI")
        pub_ack = await asyncio.wait_for(done, 60)
    await sub.unsubscribe()
    emit(result(CLIENT, label, n, size, t, errors=n - pub_ack.get("count", 0)))


async def pull_subscription(js: Any, durable: str, explicit: bool) -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig

    policy = AckPolicy.EXPLICIT if explicit else AckPolicy.NONE
    config = ConsumerConfig(durable_name=durable, ack_policy=policy)
    return await js.pull_subscribe(SUBJECT, durable=durable, stream=STREAM, config=config)


async def fetch_n(psub: Any, n: int, explicit: bool) -> int:
    """Fetch in batches of 500 until ``n`` messages arrived; ``await ack()`` each."""
    got = 0
    while got < n:
        msgs = await psub.fetch(min(BATCH, n - got), timeout=5)
        if explicit:
            for m in msgs:
                await m.ack()
        got += len(msgs)
    return got


async def fetch_loop(nc: Any, js: Any, label: str, n: int, size: int, explicit: bool):
    """S3/S4: ``psub.fetch(500)`` (+ ``ack()`` for S3)."""
    psub = await pull_subscription(js, "DPY", explicit)
    with Timed() as t:
        got = await fetch_n(psub, n, explicit)
        await nc.flush(timeout=30)
    emit(result(CLIENT, label, got, size, t))


async def consume_callback(nc: Any, js: Any, label: str, n: int, size: int) -> None:
    """S7: a durable push subscription whose callback acks each message."""
    from nats.js.api import AckPolicy, ConsumerConfig

    done = asyncio.Event()
    count = [0]

    async def on_msg(m: Any) -> None:
        await m.ack()
        count[0] += 1
        if count[0] == n:
            done.set()

    config = ConsumerConfig(durable_name="DPY7", ack_policy=AckPolicy.EXPLICIT)
    with Timed() as t:
        sub = await js.subscribe(
            SUBJECT, durable="DPY7", stream=STREAM, cb=on_msg, manual_ack=True, config=config
        )
        await asyncio.wait_for(done.wait(), 300)
        await nc.flush(timeout=30)
    await sub.unsubscribe()
    emit(result(CLIENT, label, n, size, t))


async def iterate_memory(nc: Any, js: Any, label: str, n: int, size: int) -> None:
    """MEM: RSS growth (peak minus before) while fetching and acking ``n`` messages."""
    psub = await pull_subscription(js, "DPYM", True)
    gc.collect()
    before = rss_mb()
    reset_peak_rss()
    with Timed() as t:
        got = await fetch_n(psub, n, True)
        await nc.flush(timeout=30)
    peak = max(peak_rss_mb(), before)
    emit(result(CLIENT, label, got, size, t, rss_mb=round(peak - before, 2),
                rss_before_mb=round(before, 2), rss_peak_mb=round(peak, 2)))  # fmt: skip


async def timed_calls(call: Callable[[], Awaitable[Any]], n: int) -> tuple[Timed, list[float]]:
    """Await ``call()`` ``n`` times, timed: the section, and each call's latency in us."""
    lat = []
    clock = time.perf_counter_ns
    with Timed() as t:
        for _ in range(n):
            t0 = clock()
            await call()
            lat.append((clock() - t0) / 1000)
    return t, lat


async def subscribe_responder(nc: Any, payload: bytes) -> None:
    """Answer every request on the service subject with ``payload`` (a callback)."""

    async def responder(m: Any) -> None:
        await m.respond(payload)

    await nc.subscribe(SERVICE, cb=responder)
    await nc.flush()


async def requests(nc: Any, label: str, n: int, size: int) -> None:
    """100 requests to warm up, then ``n`` timed ones: the row ``label``."""
    payload = b"x" * size

    def call() -> Awaitable[Any]:
        return nc.request(SERVICE, payload, timeout=2)

    await timed_calls(call, 100)
    t, lat = await timed_calls(call, n)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


async def latency(nc: Any, js: Any, label: str, n: int, size: int, storage: str) -> None:
    """S5: ``nc.request`` to an in-process responder; then three JetStream API calls.

    S5info: ``js.stream_info``; S5cinfo: ``js.consumer_info``; S5ccreate:
    ``js.add_consumer`` of an existing durable with the same config.
    """
    await subscribe_responder(nc, b"x" * size)
    await requests(nc, label, n, size)

    await ensure_stream(js, storage)
    from nats.js.api import AckPolicy

    ni = max(1, n // 5)
    await js.add_consumer(STREAM, durable_name="DINFO", ack_policy=AckPolicy.EXPLICIT)
    calls = (
        ("S5info", lambda: js.stream_info(STREAM)),
        ("S5cinfo", lambda: js.consumer_info(STREAM, "DINFO")),
        (  # the same config again
            "S5ccreate",
            lambda: js.add_consumer(STREAM, durable_name="DCREATE", ack_policy=AckPolicy.EXPLICIT),
        ),
    )
    for row, call in calls:
        await call()  # warm-up
        t, lat = await timed_calls(call, ni)
        emit(result(CLIENT, row, ni, 0, t, **latency_fields(lat)))


async def serve(nc: Any, size: int) -> None:
    """S5x's responder: a callback answers each request, until stdin closes."""
    payload = b"x" * size
    await subscribe_responder(nc, payload)
    # nats-py's flush() writes its PING straight to the socket, ahead of a SUB still in its
    # pending buffer, so the PONG can come before the server has the SUB (a requester then
    # met "no responders"). A request answered through the server proves the SUB is there.
    await nc.request(SERVICE, payload, timeout=10)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, wait_for_stdin_to_close)


async def latency_remote(nc: Any, label: str, n: int, size: int, port: int) -> None:
    """S5x: ``nc.request`` to this client's responder in another process (:func:`serve`)."""
    with responder_process("driver_natspy", port, size):
        await requests(nc, label, n, size)


def web_server(args: Any) -> None:
    """S8: one event loop in a background thread; 16 threads bridge into it.

    The way a Django or Flask worker uses nats-py: each thread calls
    ``asyncio.run_coroutine_threadsafe(js.publish(...), loop).result()``.
    """
    import nats

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="nats-py-loop")
    thread.start()

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    try:
        nc = on_loop(nats.connect(f"nats://127.0.0.1:{args.port}"))
        try:
            js = nc.jetstream()
            on_loop(ensure_stream(js, args.storage))
            payload = b"x" * args.size
            on_loop(js.publish(SUBJECT, payload))  # warm-up
            t, n, lat = run_threads(
                S8_THREADS, args.n, lambda i: lambda: on_loop(js.publish(SUBJECT, payload))
            )
        finally:
            on_loop(nc.close())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    emit(result(CLIENT, args.label, n, args.size, t, threads=S8_THREADS,
                **latency_fields(lat)))  # fmt: skip


async def kv_ops(js: Any, label: str, n: int, size: int, get: bool) -> None:
    """KVput / KVget: ``await kv.put`` / ``await kv.get`` over 1,000 keys (direct gets)."""
    kv = await js.create_key_value(bucket=BUCKET, direct=True)
    payload = b"x" * size
    keys = [f"k{i}" for i in range(KEYS)]
    for key in keys:
        await kv.put(key, payload)
    lat = []
    record = lat.append
    clock = time.perf_counter_ns
    with Timed() as t:
        for i in range(n):
            t0 = clock()
            if get:
                await kv.get(keys[i % KEYS])
            else:
                await kv.put(keys[i % KEYS], payload)
            record((clock() - t0) / 1000)
    emit(result(CLIENT, label, n, size, t, **latency_fields(lat)))


async def kv_watch(js: Any, label: str, n: int, size: int) -> None:
    """KVwatch: ``kv.watchall()`` delivers the prefilled bucket's keys, up to None."""
    kv = await js.key_value(BUCKET)
    got = 0
    with Timed() as t:
        watcher = await kv.watchall()
        while await watcher.updates(timeout=30) is not None:
            got += 1
        await watcher.stop()
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


async def object_store(js: Any, label: str, n: int, size: int, get: bool) -> None:
    """OBJput: ``put`` of a ``size``-byte object, ``n`` times; OBJget: ``get(writeinto=)``.

    ``writeinto`` is nats-py's streaming path (``get()`` alone appends chunk after
    chunk to one ``bytes``, which grows quadratically on a 100 MiB object).
    """
    obs = await js.create_object_store(OBJ_BUCKET)
    data = bytes(size)
    await obs.put("warm-up", data[: 1 << 20])
    await obs.get("warm-up", writeinto=_Sink())
    if get:
        await obs.put("big", data)
        with Timed() as t:
            for _ in range(n):
                sink = _Sink()
                await obs.get("big", writeinto=sink)
                if sink.n != size:
                    raise RuntimeError(f"get wrote {sink.n} of {size} bytes")
    else:
        with Timed() as t:
            for _ in range(n):
                await obs.put("big", data)
    emit(result(CLIENT, label, n, size, t))


async def run(args: Any, base: str) -> None:
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{args.port}", pending_size=64 << 20)
    try:
        js = nc.jetstream(publish_async_max_pending=args.window)
        if base == "S1":
            await publish_sync(js, args.label, args.n, args.size, args.storage)
        elif base == "S2":
            await publish_async(js, args.label, args.n, args.size, args.storage, args.window)
        elif base in ("S3", "S4"):
            await fetch_loop(nc, js, args.label, args.n, args.size, base == "S3")
        elif base == "S7":
            await consume_callback(nc, js, args.label, args.n, args.size)
        elif base == "MEM":
            await iterate_memory(nc, js, args.label, args.n, args.size)
        elif base == "S5":
            await latency(nc, js, args.label, args.n, args.size, args.storage)
        elif base == "S5x" and args.serve:
            await serve(nc, args.size)
        elif base == "S5x":
            await latency_remote(nc, args.label, args.n, args.size, args.port)
        elif base in ("KVput", "KVget"):
            await kv_ops(js, args.label, args.n, args.size, base == "KVget")
        elif base == "KVwatch":
            await kv_watch(js, args.label, args.n, args.size)
        elif base in ("OBJput", "OBJget"):
            await object_store(js, args.label, args.n, args.size, base == "OBJget")
        elif base == "FASTB":
            await fast_batch(nc, args.label, args.n, args.size, args.storage)
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> None:
    args, sc = driver_args(argv)
    try:
        import nats  # noqa: F401
    except ImportError as e:
        unavailable(CLIENT, args.label, f"nats-py is not installed ({e})")
        return
    if sc.base == "S8":
        web_server(args)
    else:
        asyncio.run(run(args, sc.base))


if __name__ == "__main__":
    main()
