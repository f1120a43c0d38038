"""Sixteen threads share one client for 30 s: requests, JetStream publishes, fetches, callbacks.

Stresses the read role (``jetstream_sync/_connection/read_role.py``): a requester reading
the socket for its own reply and routing everyone else's, the reader thread
taking the role back. Every reply must reach its own requester exactly once,
every PubAck carry its own sequence, every stored message be fetched once, and
every subscription keep its order, with callbacks never on a reading thread.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync._connection.read_role import ReadRole
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.polling import wait_for

THREADS = 16
DURATION = 30.0
ACK_WAIT = 10.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(DURATION + 3 * ACK_WAIT + 60)]


class Ledger:
    """What the workers did and saw, recorded under one lock."""

    def __init__(self) -> None:
        """Start empty."""
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.ops: dict[str, int] = defaultdict(int)
        self.ack_seqs: list[int] = []
        self.stored: set[bytes] = set()
        self.fetched: list[bytes] = []
        self.sent_core: dict[int, int] = defaultdict(int)  # worker -> messages published
        self.seen_core: dict[int, list[int]] = defaultdict(list)  # worker -> numbers received
        self.callback_threads: set[int] = set()
        self.worker_threads: set[int] = set()

    def error(self, text: str) -> None:
        """Record a failure seen on a worker thread."""
        with self.lock:
            self.errors.append(text)


def _worker(
    index: int,
    nc: jetstream_sync.Client,
    js: jetstream_sync.JetStreamContext,
    consumer: Any,
    subjects: dict[str, str],
    ledger: Ledger,
    end: float,
) -> None:
    rng = random.Random(index)
    with ledger.lock:
        ledger.worker_threads.add(threading.get_ident())
    n = core_sent = 0
    while time.monotonic() < end:
        n += 1
        payload = b"%d-%d" % (index, n)
        op = rng.choice(("request", "publish", "fetch", "core"))
        try:
            if op == "request":
                reply = nc.request(subjects["svc"], payload, timeout=10)
                if reply.data != payload:
                    ledger.error(f"request {payload!r} got the reply {reply.data!r}")
            elif op == "publish":
                ack = js.publish(subjects["stream"], payload, timeout=10)
                with ledger.lock:
                    ledger.ack_seqs.append(ack.seq)
                    ledger.stored.add(payload)
            elif op == "fetch":
                msgs = consumer.fetch(rng.randint(1, 20), timeout=0.2)
                for msg in msgs:
                    msg.ack()
                with ledger.lock:
                    ledger.fetched.extend(m.data for m in msgs)
            else:
                nc.publish(subjects["core"], b"%d %d" % (index, core_sent))
                core_sent += 1
                with ledger.lock:
                    ledger.sent_core[index] = core_sent
        except Exception as exc:  # noqa: BLE001 - every failure is reported by the test
            ledger.error(f"{op} {payload!r}: {type(exc).__name__}: {exc}")
        with ledger.lock:
            ledger.ops[op] += 1


def test_sixteen_threads_mixing_everything_lose_nothing(
    nc: jetstream_sync.Client,
    js: jetstream_sync.JetStreamContext,
    stream: Stream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """30 s of 16 threads: no reply lost, duplicated or misrouted; order kept; no callback reads."""
    ledger = Ledger()
    leads = [0]
    lead = ReadRole._lead

    def counting_lead(self: ReadRole, *args: object) -> bool:
        leads[0] += 1
        return lead(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ReadRole, "_lead", counting_lead)
    name = stream.name
    subjects = {"svc": f"stress.svc.{name}", "core": f"stress.core.{name}", "stream": f"{name}.x"}

    def respond(msg: jetstream_sync.Msg) -> None:
        with ledger.lock:
            ledger.callback_threads.add(threading.get_ident())
        msg.respond(msg.data)

    def record(msg: jetstream_sync.Msg) -> None:
        worker, number = (int(x) for x in msg.data.split())
        with ledger.lock:
            ledger.callback_threads.add(threading.get_ident())
            ledger.seen_core[worker].append(number)

    nc.subscribe(subjects["svc"], cb=respond)
    nc.subscribe(subjects["core"], cb=record, pending_msgs_limit=1_000_000)
    consumer = stream.create_consumer(ack_wait=ACK_WAIT)
    nc.flush()

    end = time.monotonic() + DURATION
    workers = [
        threading.Thread(
            target=_worker,
            args=(i, nc, js, consumer, subjects, ledger, end),
            name=f"stress-{i}",
        )
        for i in range(THREADS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    # A fetch that timed out on the client's clock just as the server delivered
    # leaves those messages unacknowledged: they come again after ACK_WAIT.
    drain = time.monotonic() + 3 * ACK_WAIT
    while not ledger.stored <= set(ledger.fetched) and time.monotonic() < drain:
        batch = consumer.fetch(100, timeout=1)
        for msg in batch:
            msg.ack()
        ledger.fetched.extend(m.data for m in batch)
    nc.flush()
    wait_for(lambda: sum(map(len, ledger.seen_core.values())) >= sum(ledger.sent_core.values()))

    assert ledger.errors == []
    assert all(ledger.ops[op] > 100 for op in ("request", "publish", "fetch", "core")), ledger.ops
    assert leads[0] > 0  # requesters did read the socket themselves
    assert len(set(ledger.ack_seqs)) == len(ledger.ack_seqs)
    assert len(set(ledger.fetched)) == len(ledger.fetched)  # fetched once each
    assert set(ledger.fetched) == ledger.stored  # and none lost
    for worker, count in ledger.sent_core.items():
        assert ledger.seen_core[worker] == list(range(count))  # all, in order
    assert not ledger.callback_threads & ledger.worker_threads
