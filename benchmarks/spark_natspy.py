"""The way a Python user moves JetStream data through Spark today: nats-py in ``mapPartitions``.

Each Spark task runs its own event loop with ``asyncio.run`` and its own
connection. Reading: the driver splits the stream's sequence range into one
range per partition; each task creates an ephemeral pull consumer starting at
its range's first sequence (``AckNone``, the cheapest for the reader) and
fetches batches until it has the whole range. Writing, two ways:

- :func:`write_partition` publishes every row with ``publish_async`` and
  gathers all the acks at the end (nats-py's own semaphore keeps 4,000 in
  flight; the futures of the whole partition are held until the gather);
- :func:`write_partition_windowed` is the way a user writes it: iterate the
  rows, keep a window of at most ``WINDOW`` unacknowledged publishes, wait for
  the oldest when it is full, and for the rest at the end.

These functions are shipped to the Spark workers by reference, so the
``benchmarks`` package must be importable there (the orchestrator puts the
repository root on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Iterator

FETCH_BATCH = 1000
FETCH_TIMEOUT = 5.0
WINDOW = 4000  # unacknowledged publishes at most, in write_partition_windowed


def split(first: int, last: int, partitions: int) -> list[tuple[int, int]]:
    """Split the inclusive sequence range ``first..last`` into ``partitions`` ranges."""
    total = last - first + 1
    bounds = [first + total * i // partitions for i in range(partitions + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(partitions) if bounds[i + 1] > bounds[i]]


async def _read_range(url: str, stream: str, lo: int, hi: int) -> list[tuple[str, int, bytes]]:
    """Fetch ``lo..hi`` through an ephemeral consumer; return ``(subject, seq, data)`` rows."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=lo,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
        )
        sub = await js.pull_subscribe(">", stream=stream, config=config)
        rows: list[tuple[str, int, bytes]] = []
        while len(rows) < hi - lo + 1:
            want = min(FETCH_BATCH, hi - lo + 1 - len(rows))
            for msg in await sub.fetch(want, timeout=FETCH_TIMEOUT):
                seq = msg.metadata.sequence.stream
                if seq > hi:
                    break
                rows.append((msg.subject, seq, msg.data))
        await sub.unsubscribe()
        return rows
    finally:
        await nc.close()


def read_partition(
    url: str, stream: str, ranges: Iterable[tuple[int, int]]
) -> Iterator[tuple[str, int, bytes]]:
    """``mapPartitions`` body: one ``asyncio.run`` per range of this partition."""
    for lo, hi in ranges:
        yield from asyncio.run(_read_range(url, stream, lo, hi))


async def _publish_rows(url: str, rows: Iterable[tuple[str, bytes]]) -> int:
    """Publish every ``(subject, data)`` row with ``publish_async``; gather the acks."""
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        futures = [await js.publish_async(subject, data) for subject, data in rows]
        acks = await asyncio.gather(*futures)
        return len(acks)
    finally:
        await nc.close()


def write_partition(url: str, rows: Iterable[object]) -> Iterator[int]:
    """``mapPartitions`` body: publish the partition's rows; yield how many were acked."""
    pairs = [(row["subject"], bytes(row["data"])) for row in rows]  # type: ignore[index]
    yield asyncio.run(_publish_rows(url, pairs))


async def _publish_windowed(url: str, rows: Iterable[object]) -> int:
    """Publish each row as it comes, at most ``WINDOW`` acks outstanding; return the acks."""
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        window: deque[asyncio.Future[object]] = deque()
        acked = 0
        for row in rows:
            if len(window) >= WINDOW:
                await window.popleft()
                acked += 1
            window.append(await js.publish_async(row["subject"], bytes(row["data"])))  # type: ignore[index]
        for future in window:
            await future
            acked += 1
        return acked
    finally:
        await nc.close()


def write_partition_windowed(url: str, rows: Iterable[object]) -> Iterator[int]:
    """``mapPartitions`` body: publish the rows with a bounded window; yield how many were acked."""
    yield asyncio.run(_publish_windowed(url, rows))
