"""Stream leader failover on a real 3-node cluster: acked means stored once, nothing lost.

Each test runs a workload against an R3 stream, SIGKILLs the server leading
that stream in the middle of it, lets the workload finish, restarts the
killed server and checks that it caught up. The counts of each run go to
``FAILOVER_COUNTS`` and are printed (``pytest -s``) for the reliability page.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync.errors import (
    ConnectionLostError,
    DuplicateMsgIdInProcessError,
    NoRespondersError,
    StreamNotFoundError,
)
from tests.fixtures.cluster import NatsCluster
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# What a publisher retries with the same msg_id: the message may or may not be stored.
RETRYABLE = (TimeoutError, ConnectionLostError, NoRespondersError, DuplicateMsgIdInProcessError)
RUN_DEADLINE = 90.0  # seconds a whole workload may take, failover included

FAILOVER_COUNTS: dict[str, dict[str, Any]] = {}


# ---------------------------------------------------------------- helpers


class Worker:
    """One owned thread running ``target``; its exception is re-raised by ``join``."""

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        """Start the thread."""
        self.error: BaseException | None = None
        self._target = target
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        """Run the target, keeping what it raises."""
        try:
            self._target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test by join()
            self.error = exc

    def join(self, timeout: float = RUN_DEADLINE) -> None:
        """Join within ``timeout``; re-raise the target's exception."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.thread.name} still running after {timeout} s"
        if self.error is not None:
            raise self.error


def stream_leader(cluster: NatsCluster, stream: Any) -> tuple[int, NatsServer]:
    """Index and server of the stream's current leader (asked through the stream's info)."""
    name = wait_for(
        lambda: stream.info().cluster.leader, timeout=15, ignore=jetstream_sync.NatsError
    )
    server = cluster.server_named(name)
    return cluster.servers.index(server), server


def jsz_state(server: NatsServer, stream: str) -> dict[str, Any] | None:
    """The stream's state as ``server`` itself holds it (monitor ``jsz``), or None."""
    jsz = server.monitor("jsz", accounts=True, streams=True)
    for account in jsz.get("account_details") or ():
        for detail in account.get("stream_detail") or ():
            if detail["name"] == stream:
                state = detail["state"]
                return {k: state.get(k) for k in ("messages", "bytes", "first_seq", "last_seq")}
    return None


def wait_caught_up(cluster: NatsCluster, stream: str, messages: int) -> dict[str, Any]:
    """Block until every server holds the same state for ``stream`` with ``messages`` in it."""

    def same() -> dict[str, Any] | None:
        states = [jsz_state(server, stream) for server in cluster.servers]
        if states[0] and states[0]["messages"] == messages and all(s == states[0] for s in states):
            return states[0]
        return None

    return wait_for(
        same,
        timeout=30,
        interval=0.1,
        ignore=OSError,
        message=lambda: f"replicas differ: {[jsz_state(s, stream) for s in cluster.servers]}",
    )


def read_stream(stream: Any, last_seq: int) -> list[tuple[int, str, bytes]]:
    """Every stored message as (seq, msg id, payload), read from the leader one by one."""
    out = []
    for seq in range(1, last_seq + 1):
        msg = _get_once_available(stream, seq)
        out.append((msg.seq, msg.headers["Nats-Msg-Id"], msg.data))
    return out


def _get_once_available(stream: Any, seq: int) -> Any:
    """``get_msg(seq)``, retried while the cluster answers 503 (still settling after a kill)."""

    def get() -> Any:
        try:
            return stream.get_msg(seq, timeout=5)
        except jetstream_sync.APIError as error:
            if error.code != 503:
                raise
            return None

    return wait_for(get, timeout=30, interval=0.1, message=f"message {seq} stayed unavailable")


def check_stored_once(stream: Any, sent: dict[str, bytes]) -> int:
    """Assert the stream holds each sent message exactly once and nothing else; its size."""
    state = stream.info().state
    stored = read_stream(stream, state.last_seq)
    ids = [msg_id for _, msg_id, _ in stored]
    repeated = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not repeated, f"stored more than once: {repeated[:10]}"
    assert {msg_id: data for _, msg_id, data in stored} == sent
    assert state.messages == len(sent) == len(stored)
    return len(stored)


@contextlib.contextmanager
def r3_stream(cluster: NatsCluster, prefix: str) -> Iterator[Any]:
    """A fresh R3 stream whose duplicate window (10 min) covers the whole run.

    Its handle uses an admin connection to the whole cluster, open while the
    stream is in use; the stream is deleted afterwards.
    """
    name = unique_stream_name(prefix)
    with jetstream_sync.connect(cluster.urls) as admin:
        js = admin.jetstream(timeout=10)
        stream = js.create_stream(
            name=name, subjects=[f"{name}.>"], num_replicas=3, duplicate_window=600.0
        )
        try:
            yield stream
        finally:
            cluster.heal()
            with contextlib.suppress(StreamNotFoundError):
                js.delete_stream(name)


def consume_until(
    consumer: Any, stop: threading.Event, handle: Callable[[jetstream_sync.Msg], None]
) -> None:
    """Iterate ``consumer.messages()`` (heartbeats on), handing each message to ``handle``,
    until ``stop`` is set."""
    with consumer.messages(expires=4.0, heartbeat=1.0) as it:
        while not stop.is_set():
            try:
                msg = it.next(timeout=0.5)
            except TimeoutError:
                continue
            handle(msg)


def servers_for(cluster: NatsCluster, leader: int, client_on: str) -> list[str]:
    """The client's server list: the stream leader first, or a follower first."""
    first = leader if client_on == "leader" else (leader + 1) % cluster.size
    return [cluster.servers[first].url] + [
        s.url for i, s in enumerate(cluster.servers) if i != first
    ]


class RetryingPublisher:
    """Publishes ``count`` messages with ``js.publish``, retrying each with its msg_id."""

    def __init__(self, js: Any, subject: str, count: int) -> None:
        """Nothing is sent until ``run``."""
        self.js, self.subject, self.count = js, subject, count
        self.sent: dict[str, bytes] = {}
        self.acked = 0
        self.attempts = 0
        self.duplicates = 0
        self.errors: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        """Publish every message until acked; give up (raise) at the run deadline."""
        deadline = time.monotonic() + RUN_DEADLINE
        for i in range(self.count):
            msg_id, data = f"id-{i}", b"payload-%d" % i
            self.sent[msg_id] = data
            while True:
                self.attempts += 1
                try:
                    ack = self.js.publish(self.subject, data, msg_id=msg_id, timeout=2.0)
                except RETRYABLE as exc:
                    self.errors[type(exc).__name__] += 1
                    if time.monotonic() > deadline:
                        raise
                    continue
                self.duplicates += ack.duplicate
                self.acked += 1
                break

    def counts(self) -> dict[str, Any]:
        """The figures of the run."""
        return {
            "sent": len(self.sent),
            "attempts": self.attempts,
            "acked": self.acked,
            "retried": self.attempts - len(self.sent),
            "duplicates_suppressed": self.duplicates,
            "errors": dict(self.errors),
        }


def report(key: str, counts: dict[str, Any]) -> None:
    """Keep and print one run's counts."""
    FAILOVER_COUNTS[key] = counts
    print(f"\nfailover {key}: {counts}")


# ---------------------------------------------------------------- publishing


@pytest.mark.parametrize("client_on", ["leader", "follower"])
def test_publish_loop_survives_leader_kill(cluster: NatsCluster, client_on: str) -> None:
    """A retrying publish loop with msg_id: every message acked, stored once, none missing."""
    with r3_stream(cluster, "FOPUB") as stream:
        index, _ = stream_leader(cluster, stream)
        urls = servers_for(cluster, index, client_on)
        with jetstream_sync.connect(urls, reconnect_time_wait=0.2, no_randomize=True) as nc:
            publisher = RetryingPublisher(nc.jetstream(), f"{stream.name}.x", 1500)
            worker = Worker("publisher", publisher.run)
            try:
                wait_for(lambda: publisher.acked >= 300 or worker.error, timeout=30)
                cluster.kill(index)
            finally:
                worker.join()
            reconnects = nc.stats.reconnects
        stored = check_stored_once(stream, publisher.sent)
        cluster.restart(index)
        state = wait_caught_up(cluster, stream.name, stored)
        counts = {**publisher.counts(), "stored": stored, "reconnects": reconnects}
        report(f"publish/{client_on}", counts)
        assert state["last_seq"] == stored
        assert publisher.acked == len(publisher.sent)
        assert publisher.errors, "the kill should have failed at least one attempt"


def _publish_async_all(
    js: Any,
    subject: str,
    sent: dict[str, bytes],
    has_leader: Callable[[], object],
    on_done: Callable[[Any], object],
) -> dict[str, Any]:
    """publish_async every message; republish failed futures with the same msg_id until acked.

    Before a round of republishing it waits until ``has_leader()`` says the
    stream has a leader again (the back-off a real application would use).
    ``on_done`` is every future's done-callback.
    """
    deadline = time.monotonic() + RUN_DEADLINE
    todo = list(sent)
    rounds = attempts = duplicates = 0
    errors: collections.Counter[str] = collections.Counter()
    while todo:
        assert time.monotonic() < deadline, f"{len(todo)} messages never acked"
        if rounds:
            wait_for(has_leader, timeout=30, ignore=jetstream_sync.NatsError)
        rounds += 1
        futures = []
        for msg_id in todo:
            attempts += 1
            future = js.publish_async(subject, sent[msg_id], msg_id=msg_id)
            future.add_done_callback(on_done)
            futures.append((msg_id, future))
        todo = []
        for msg_id, future in futures:
            exc = future.exception(timeout=30)
            if exc is None:
                duplicates += future.result().duplicate
            elif isinstance(exc, RETRYABLE):
                errors[type(exc).__name__] += 1
                todo.append(msg_id)
            else:
                raise exc
    return {
        "sent": len(sent),
        "attempts": attempts,
        "acked": len(sent),
        "retried": attempts - len(sent),
        "rounds": rounds,
        "duplicates_suppressed": duplicates,
        "errors": dict(errors),
    }


@pytest.mark.parametrize("client_on", ["leader", "follower"])
def test_publish_async_survives_leader_kill(cluster: NatsCluster, client_on: str) -> None:
    """publish_async with msg_id, failed futures republished: stored once, none missing."""
    with r3_stream(cluster, "FOASYNC") as stream:
        index, _ = stream_leader(cluster, stream)
        urls = servers_for(cluster, index, client_on)
        acked = [0]

        def has_leader() -> object:
            """Whether the stream has a leader (asked on the admin connection)."""
            return stream.info(timeout=2.0).cluster.leader

        def count_ack(future: Any) -> None:
            """Count resolved futures (done-callback)."""
            if future.exception() is None:
                acked[0] += 1

        with jetstream_sync.connect(urls, reconnect_time_wait=0.2, no_randomize=True) as nc:
            js = nc.jetstream(ack_timeout=3.0, max_ack_inflight=500)
            sent = {f"id-{i}": b"payload-%d" % i for i in range(6000)}
            result: dict[str, Any] = {}
            worker = Worker(
                "async-publisher",
                lambda: result.update(
                    _publish_async_all(js, f"{stream.name}.x", sent, has_leader, count_ack)
                ),
            )
            try:
                wait_for(lambda: acked[0] >= 1500 or worker.error, timeout=30)
                cluster.kill(index)
            finally:
                worker.join()
            reconnects = nc.stats.reconnects
        stored = check_stored_once(stream, sent)
        cluster.restart(index)
        wait_caught_up(cluster, stream.name, stored)
        report(
            f"publish_async/{client_on}",
            {**result, "stored": stored, "reconnects": reconnects},
        )
        assert result["errors"], "the kill should have failed at least one future"


def test_retry_loop_rides_a_duplicate_in_process(cluster: NatsCluster) -> None:
    """A copy sent while its twin is replicated gets the typed 10158; the documented loop
    retries it into the twin's PubAck (duplicate=True), each message stored once."""
    with r3_stream(cluster, "FODUP") as stream, jetstream_sync.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=10)
        subject = f"{stream.name}.x"
        twins = [
            (js.publish_async(subject, b"m%d" % i, msg_id=f"m{i}"),
             js.publish_async(subject, b"m%d" % i, msg_id=f"m{i}"))
            for i in range(200)
        ]  # fmt: skip
        in_process = []
        for i, (first, second) in enumerate(twins):
            assert first.result(timeout=10).duplicate is False
            error = second.exception(timeout=10)
            if error is not None:
                assert isinstance(error, jetstream_sync.DuplicateMsgIdInProcessError), error
                assert (error.code, error.err_code) == (409, 10158)
                in_process.append(i)
        assert in_process, "no copy arrived while its twin was still being stored"
        retry = (
            jetstream_sync.ConnectionLostError,
            jetstream_sync.TimeoutError,
            jetstream_sync.DuplicateMsgIdInProcessError,
            jetstream_sync.StreamTooManyRequestsError,
        )  # docs/reliability.md's loop
        for i in in_process:
            while True:
                try:
                    ack = js.publish(subject, b"m%d" % i, msg_id=f"m{i}")
                    break
                except retry:
                    continue
            assert ack.duplicate and ack.seq == twins[i][0].result().seq
        assert stream.info().state.messages == 200


# ---------------------------------------------------------------- consuming


@pytest.mark.parametrize("victim", ["stream_leader", "consumer_leader"])
def test_consumers_keep_consuming_through_leader_kill(cluster: NatsCluster, victim: str) -> None:
    """messages() on a durable (acked) and an ordered consumer lose nothing over a leader kill.

    The server killed leads the stream, or the durable consumer (the two may
    coincide); the client is connected to it, so its link is cut too. The
    durable sees every message at least once (acks in flight at the kill may
    be lost, so some come again); the ordered consumer sees each exactly
    once, in stream order.
    """
    count = 1200
    with r3_stream(cluster, "FOCONS") as stream:
        index, leader = stream_leader(cluster, stream)
        stream_leader_name = leader.server_name
        durable = stream.create_consumer(durable_name="work", ack_wait=3.0, num_replicas=3)
        consumer_leader = wait_for(lambda: durable.info().cluster.leader, timeout=15)
        if victim == "consumer_leader":
            index = cluster.servers.index(cluster.server_named(consumer_leader))
        urls = servers_for(cluster, index, "leader")  # the kill also cuts the link
        stop = threading.Event()
        with jetstream_sync.connect(urls, reconnect_time_wait=0.2, no_randomize=True) as nc:
            js = nc.jetstream(timeout=10)
            work = js.consumer(stream.name, "work")
            ordered = js.ordered_consumer(stream.name)
            durable_seen: list[tuple[int, int]] = []  # (stream seq, num_delivered)
            ordered_seen: list[int] = []

            def ack_durable(msg: jetstream_sync.Msg) -> None:
                """Note the delivery, then ack it."""
                meta = msg.metadata
                durable_seen.append((meta.sequence.stream, meta.num_delivered))
                with contextlib.suppress(jetstream_sync.NatsError):
                    msg.ack()

            def note_ordered(msg: jetstream_sync.Msg) -> None:
                """Note the stream sequence."""
                ordered_seen.append(msg.metadata.sequence.stream)

            publisher = RetryingPublisher(js, f"{stream.name}.x", count)
            workers = [
                Worker("durable", lambda: consume_until(work, stop, ack_durable)),
                Worker("ordered", lambda: consume_until(ordered, stop, note_ordered)),
                Worker("publisher", publisher.run),
            ]
            try:
                wait_for(
                    lambda: (
                        len(ordered_seen) >= count // 3
                        and len(durable_seen) >= count // 3
                        or any(w.error for w in workers)
                    ),
                    timeout=30,
                )
                cluster.kill(index)
                workers[2].join()
                wait_for(
                    lambda: (
                        len({s for s, _ in durable_seen}) >= count
                        and len(ordered_seen) >= count
                        or any(w.error for w in workers)
                    ),
                    timeout=60,
                    message=lambda: (
                        f"durable {len({s for s, _ in durable_seen})}, "
                        f"ordered {len(ordered_seen)} of {count}"
                    ),
                )
            finally:
                stop.set()
                for worker in workers:
                    worker.join()
            reconnects = nc.stats.reconnects
        stored = check_stored_once(stream, publisher.sent)
        cluster.restart(index)
        wait_caught_up(cluster, stream.name, stored)
        durable_seqs = [s for s, _ in durable_seen]
        assert sorted(set(durable_seqs)) == list(range(1, count + 1))
        assert ordered_seen == list(range(1, count + 1))
        report(
            f"consumers/{victim}",
            {
                **publisher.counts(),
                "stored": stored,
                "reconnects": reconnects,
                "killed": cluster.servers[index].server_name,
                "stream_leader": stream_leader_name,
                "consumer_leader": consumer_leader,
                "durable_deliveries": len(durable_seqs),
                "durable_redelivered": len(durable_seqs) - len(set(durable_seqs)),
                "ordered_deliveries": len(ordered_seen),
            },
        )
