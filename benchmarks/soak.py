"""A soak run: publish and consume for a while through cut links and server restarts.

``python -m benchmarks.soak --duration 60`` starts a nats-server (file storage,
a store directory that survives restarts, a fixed port) behind the fault
proxy of ``tests/fixtures/proxy.py``, then for ``--duration`` seconds:

- 4 threads publish with ``msg_id``: three call ``publish`` and republish
  each message that fails with ``TimeoutError``, ``ConnectionLostError`` or
  ``NoRespondersError`` under the same ``msg_id`` until it is acked; the
  fourth does the same with windows of ``publish_async`` futures;
- 2 threads consume from one durable pull consumer with explicit acks, one
  through ``messages()`` (``ack``), one through ``fetch`` (``ack_sync``);
- a fault thread cuts every link of the proxy every 20 s (closer together on
  short runs, so a 60 s run has at least two cuts) and restarts the server
  twice (same port, same store: the proxy reconnects to it).

Then it lets the consumers catch up, closes everything, reads the stream back
and prints one report: messages published, acked, consumed, lost (acked and
never consumed), duplicated (consumed more than once: redeliveries, which
at-least-once delivery allows; stored more than once: never allowed), faults
injected, RSS at start and end, threads and open file descriptors before
``connect`` and after ``close()``. ``--json`` writes it as JSON too.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jetstream_sync as js
from jetstream_sync.testing import NatsServer
from tests.fixtures.leaks import LeakCheck
from tests.fixtures.proxy import FaultProxy

STREAM = "SOAK"
SUBJECT = "soak.msgs"
DURABLE = "soak-worker"
PUBLISHERS = 4  # the last one publishes asynchronously
CONSUMERS = 2
ASYNC_WINDOW = 100
PAYLOAD = 128
ACK_WAIT = 5.0
RETRYABLE = (js.TimeoutError, js.ConnectionLostError, js.NoRespondersError)
# a pull the server ended because it shuts down or its consumer moved: pull again
PULL_ENDED = (*RETRYABLE, js.ServerShutdownError, js.LeadershipChangedError)
OPTIONS = {
    "ping_interval": 1.0,
    "max_outstanding_pings": 2,
    "reconnect_time_wait": 0.1,
    "reconnect_jitter": 0.05,
    "max_reconnect_attempts": -1,
    "connect_timeout": 1.0,
}


@dataclass
class Report:
    """The figures of one soak run (see the module docstring)."""

    duration_s: float
    published: int = 0
    publish_retries: int = 0
    acked: int = 0
    acked_as_duplicate: int = 0
    consumed: int = 0
    consumed_twice: int = 0
    ack_failures: int = 0
    lost: int = 0
    stored: int = 0
    stored_twice: int = 0
    missing_from_stream: int = 0
    cuts: int = 0
    restarts: int = 0
    reconnects: int = 0
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    leaked_threads: list[str] = field(default_factory=list)
    leaked_fds: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def faults(self) -> int:
        """Cuts plus restarts."""
        return self.cuts + self.restarts

    def text(self) -> str:
        """The report as aligned ``name: value`` lines."""
        lines = [f"soak report ({self.duration_s:.0f} s)"]
        for name, value in asdict(self).items():
            if name not in ("duration_s", "errors"):
                lines.append(f"  {name:20} {value}")
        lines.append(f"  {'faults':20} {self.faults}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def rss_mb() -> float:
    """This process's resident set size in MB (Linux ``/proc``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fault_schedule(duration: float) -> list[tuple[float, str]]:
    """``(seconds from start, "cut" | "restart")`` of a run, in order.

    A cut every 20 s, closer on short runs (at least two cuts, at a third and
    two thirds of a 60 s run); restarts at a quarter and three quarters.
    """
    every = min(20.0, duration / 3)
    cuts = [("cut", every * k) for k in range(1, int(duration / every)) if every * k < duration]
    restarts = [("restart", duration / 4), ("restart", 3 * duration / 4)]
    return sorted(((at, what) for what, at in cuts + restarts))


class Ledger:
    """Per-publisher counts: how far each got acked, how often each message was seen.

    Message ``n`` of publisher ``p`` has the id ``p<p>-<n>``; a bytearray per
    publisher counts (up to 255) how often each was consumed or stored, so the
    bookkeeping of a long run stays a few bytes per message.
    """

    def __init__(self, publishers: int) -> None:
        """Nothing acked, nothing seen."""
        self.acked = [0] * publishers
        self._lock = threading.Lock()
        self._seen = [bytearray() for _ in range(publishers)]

    @staticmethod
    def msg_id(publisher: int, n: int) -> str:
        """The ``msg_id`` of message ``n`` of ``publisher``."""
        return f"p{publisher}-{n}"

    def see(self, msg_id: str) -> bool:
        """Count one sighting of ``msg_id``; return whether it was seen before."""
        publisher, n = (int(part) for part in msg_id[1:].split("-"))
        with self._lock:
            seen = self._seen[publisher]
            if len(seen) <= n:
                seen.extend(bytes(n + 1 - len(seen) + 4096))
            before = seen[n]
            seen[n] = min(before + 1, 255)
        return before > 0

    def distinct(self) -> int:
        """How many ids were seen at least once."""
        with self._lock:
            return sum(len(s) - s.count(0) for s in self._seen)

    def unseen_acked(self) -> int:
        """How many acked messages were never seen."""
        with self._lock:
            unseen = 0
            for acked, seen in zip(self.acked, self._seen, strict=True):
                head = seen[:acked]
                unseen += head.count(0) + acked - len(head)
            return unseen

    def seen_twice(self) -> int:
        """How many ids were seen more than once."""
        with self._lock:
            return sum(sum(1 for c in seen if c > 1) for seen in self._seen)


def payload(msg_id: str) -> bytes:
    """The message body: the id, padded to ``PAYLOAD`` bytes."""
    return msg_id.encode().ljust(PAYLOAD, b".")


def id_of(msg: js.Msg) -> str:
    """The id a soak message carries in its body."""
    return bytes(msg.data).split(b".", 1)[0].decode()


class Soak:
    """One soak run: the server, the proxy, the clients and every thread, owned here.

    Args:
        duration: seconds of publishing.
        rate: messages per second per publisher (0: as fast as it goes).
        catch_up: seconds the consumers get after publishing stops.
    """

    def __init__(self, duration: float, rate: float, catch_up: float) -> None:
        """Describe the run; :meth:`run` does it."""
        self.duration = duration
        self.rate = rate
        self.catch_up = catch_up
        self.report = Report(duration_s=duration)
        self.sent = Ledger(PUBLISHERS)  # acked counts; sightings are the consumed messages
        self.stop = threading.Event()  # publishing and faults end
        self.done = threading.Event()  # consuming ends
        self._cond = threading.Condition()
        self._first_sightings = 0
        self.server: NatsServer | None = None
        self.proxy: FaultProxy | None = None

    # -- bookkeeping ---------------------------------------------------------------

    def _count(self, name: str, k: int = 1) -> None:
        with self._cond:
            setattr(self.report, name, getattr(self.report, name) + k)

    def _reconnected(self) -> None:
        self._count("reconnects")

    def _consumed(self, msg: js.Msg) -> None:
        if not self.sent.see(id_of(msg)):
            with self._cond:
                self._first_sightings += 1
                self._cond.notify_all()

    def _owned(self, name: str, target: Callable[..., None], *args: object) -> threading.Thread:
        def guarded() -> None:
            try:
                target(*args)
            except BaseException as exc:  # noqa: BLE001 - reported, and the run fails
                with self._cond:
                    self.report.errors.append(f"{name}: {exc!r}")
                self.stop.set()
                self.done.set()

        return threading.Thread(target=guarded, name=f"soak-{name}")

    def _pace(self, started: float, sent: int) -> None:
        """Wait until ``sent`` messages are due at ``rate`` (returns early on stop)."""
        if self.rate > 0:
            self.stop.wait(max(0.0, started + sent / self.rate - time.monotonic()))

    # -- publishers ------------------------------------------------------------------

    def _until_acked(self, ctx: js.JetStreamContext, msg_id: str) -> js.PubAck:
        """Publish ``msg_id`` until it is acked, counting the retries."""
        while True:
            try:
                return ctx.publish(SUBJECT, payload(msg_id), msg_id=msg_id)
            except RETRYABLE:
                self._count("publish_retries")

    def _publish_sync(self, ctx: js.JetStreamContext, p: int) -> None:
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            msg_id = Ledger.msg_id(p, n)
            self._count("published")
            ack = self._until_acked(ctx, msg_id)
            self._count("acked_as_duplicate", ack.duplicate)
            n += 1
            self.sent.acked[p] = n
            self._pace(started, n)

    def _publish_async(self, ctx: js.JetStreamContext, p: int) -> None:
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            ids = [Ledger.msg_id(p, i) for i in range(n, n + ASYNC_WINDOW)]
            self._count("published", len(ids))
            pending = {i: ctx.publish_async(SUBJECT, payload(i), msg_id=i) for i in ids}
            while pending:
                retry = {}
                for msg_id, future in pending.items():
                    error = future.exception()  # every future ends within ack_timeout
                    if error is None:
                        self._count("acked_as_duplicate", future.result().duplicate)
                    elif isinstance(error, RETRYABLE):
                        self._count("publish_retries")
                        retry[msg_id] = ctx.publish_async(SUBJECT, payload(msg_id), msg_id=msg_id)
                    else:
                        raise error
                pending = retry
            n += ASYNC_WINDOW
            self.sent.acked[p] = n
            self._pace(started, n)

    # -- consumers ---------------------------------------------------------------------

    def _consume_messages(self, consumer: js.Consumer) -> None:
        with consumer.messages(max_messages=200, expires=5.0, heartbeat=1.0) as it:
            while not self.done.is_set():
                try:
                    msg = it.next(timeout=0.5)
                except js.TimeoutError:
                    continue
                self._consumed(msg)
                msg.ack()

    def _consume_fetch(self, consumer: js.Consumer) -> None:
        while not self.done.is_set():
            try:
                msgs = consumer.fetch(batch=100, timeout=1.0)
            except PULL_ENDED:
                continue
            for msg in msgs:
                self._consumed(msg)
                try:
                    msg.ack_sync(timeout=2.0)
                except RETRYABLE:
                    self._count("ack_failures")  # the server redelivers it after ack_wait

    # -- faults ------------------------------------------------------------------------

    def _inject_faults(self) -> None:
        assert self.server is not None and self.proxy is not None
        start = time.monotonic()
        for at, what in fault_schedule(self.duration):
            if self.stop.wait(max(0.0, start + at - time.monotonic())):
                return
            if what == "cut":
                self.proxy.cut()
                self._count("cuts")
            else:
                self.server.stop()
                self.server.start()
                self._count("restarts")

    # -- the run -----------------------------------------------------------------------

    def run(self) -> Report:
        """Do the whole run and return its report."""
        report = self.report
        check = LeakCheck(thread_prefixes=("jetstream_sync-", "soak-", "fault-proxy"))
        report.rss_start_mb = rss_mb()
        with tempfile.TemporaryDirectory(prefix="soak-store-") as store:
            self.server = NatsServer(port=free_port(), store_dir=store).start()
            try:
                with FaultProxy(self.server.port) as self.proxy:
                    self._traffic(self.proxy.url)
                self._read_back(self.server.url)
            finally:
                self.server.stop()
        report.rss_end_mb = rss_mb()
        leaks = check.leaks()
        report.leaked_threads, report.leaked_fds = leaks.threads, leaks.fds
        return report

    def _traffic(self, url: str) -> None:
        """Publish, consume and inject faults; return once every client is closed."""
        options = dict(OPTIONS, reconnected_cb=self._reconnected)
        with (
            js.connect(url, name="soak-pub", **options) as pub_nc,
            js.connect(url, name="soak-sub", **options) as sub_nc,
        ):
            pub_ctx = pub_nc.jetstream(timeout=2.0, ack_timeout=5.0)
            pub_ctx.create_stream(name=STREAM, subjects=["soak.>"], storage="file")
            sub_ctx = sub_nc.jetstream(timeout=2.0)
            consumer = sub_ctx.create_consumer(
                STREAM, durable_name=DURABLE, ack_policy="explicit", ack_wait=ACK_WAIT
            )
            publishers = [
                self._owned(f"pub-{p}", self._publish_sync, pub_ctx, p)
                for p in range(PUBLISHERS - 1)
            ] + [self._owned("pub-async", self._publish_async, pub_ctx, PUBLISHERS - 1)]
            consumers = [
                self._owned("sub-messages", self._consume_messages, consumer),
                self._owned("sub-fetch", self._consume_fetch, consumer),
            ]
            faults = self._owned("faults", self._inject_faults)
            threads = publishers + consumers + [faults]
            for thread in threads:
                thread.start()
            try:
                self.stop.wait(self.duration)
            finally:
                self.stop.set()
                for thread in publishers + [faults]:
                    thread.join()
                total = sum(self.sent.acked)
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._first_sightings >= total or self.done.is_set(),
                        self.catch_up,
                    )
                self.done.set()
                for thread in consumers:
                    thread.join()
        report = self.report
        report.acked = sum(self.sent.acked)
        report.consumed = self.sent.distinct()
        report.consumed_twice = self.sent.seen_twice()
        report.lost = self.sent.unseen_acked()

    def _read_back(self, url: str) -> None:
        """Count every stored message by its id, straight from the server."""
        stored = Ledger(PUBLISHERS)
        stored.acked = list(self.sent.acked)
        with js.connect(url) as nc:
            stream = nc.jetstream(timeout=10.0).stream(STREAM)
            state = stream.info().state
            with stream.ordered_consumer() as reader:
                read = 0
                while read < state.messages:
                    msgs = reader.fetch(batch=1000, timeout=10.0)
                    if not msgs:
                        raise RuntimeError(f"read back stalled at {read} of {state.messages}")
                    for msg in msgs:
                        stored.see(id_of(msg))
                    read += len(msgs)
        self.report.stored = state.messages
        self.report.stored_twice = stored.seen_twice()
        self.report.missing_from_stream = stored.unseen_acked()


def main(argv: list[str] | None = None) -> int:
    """Run a soak from the command line; exit 1 when anything was lost or duplicated."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of traffic")
    parser.add_argument("--rate", type=float, default=250.0, help="msgs/s per publisher, 0: max")
    parser.add_argument("--catch-up", type=float, default=60.0, help="seconds to drain after")
    parser.add_argument("--json", type=Path, help="also write the report here as JSON")
    args = parser.parse_args(argv)
    report = Soak(args.duration, args.rate, args.catch_up).run()
    print(report.text(), flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(asdict(report), faults=report.faults), indent=2))
    bad = report.errors or report.lost or report.stored_twice or report.missing_from_stream
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
