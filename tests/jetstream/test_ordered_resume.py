"""Every reset of an ordered consumer resumes after the last delivered message, skipping nothing.

Each cause of a reset (consumer deleted, sequence gap, reconnect after a
server restart, missed heartbeats) is exercised before anything was
delivered, with writes landing while the link is being replaced, on a plain
ordered consumer started at "new" and on a Key-Value watch (last per subject).
Re-applying the first link's deliver policy at the reset would hand out only
the last of those writes, or none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync as nats_sync
from jetstream_sync.jetstream.enums import DeliverPolicy, StorageType
from tests.fixtures.jetstream import publish_numbered, unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, stopped

_WRITES = 5


def _delete_consumers(js: nats_sync.JetStreamContext, stream: str) -> None:
    for name in js.consumer_names(stream):
        js.delete_consumer(stream, name)


# -- a plain ordered consumer ---------------------------------------------------------


@contextlib.contextmanager
def _ordered_from_new(
    js: nats_sync.JetStreamContext, name: str, heartbeat: float = 0.5
) -> Iterator[tuple[nats_sync.OrderedConsumer, nats_sync.OrderedMessageIterator]]:
    stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage=StorageType.FILE)
    publish_numbered(js, f"{name}.old", 3)  # before the start: never delivered
    oc = stream.ordered_consumer(deliver_policy=DeliverPolicy.NEW)
    with oc, oc.messages(max_messages=10, expires=2, heartbeat=heartbeat) as it:
        yield oc, it


def _next_values(it: nats_sync.OrderedMessageIterator, n: int) -> list[int]:
    return [int(it.next(timeout=20).data) for _ in range(n)]


def test_ordered_consumer_deleted_before_any_delivery(js, stream_name):
    """Writes made while the deleted link is replaced all arrive (not none, as "new" again)."""
    with _ordered_from_new(js, stream_name) as (oc, it):
        _delete_consumers(js, stream_name)
        publish_numbered(js, f"{stream_name}.x", _WRITES)
        assert _next_values(it, _WRITES) == list(range(_WRITES))
    assert oc._serial >= 2


def test_resumed_turns_true_with_the_first_link_started_at_a_sequence(js, stream_name):
    """resumed: False on the deliver policy's link, True (for good) once a link resumed."""
    with _ordered_from_new(js, stream_name) as (oc, it):
        assert (oc.resumed, it.resumed) == (False, False)
        publish_numbered(js, f"{stream_name}.x", 1)
        assert _next_values(it, 1) == [0]
        assert not it.resumed
        _delete_consumers(js, stream_name)
        publish_numbered(js, f"{stream_name}.x", 1, start=1)
        assert _next_values(it, 1) == [1]
        assert (oc.resumed, it.resumed) == (True, True)


def test_ordered_consumer_gap_before_any_delivery(js, stream_name):
    """A gap on the first message: the new link starts where the first one did."""
    with _ordered_from_new(js, stream_name) as (oc, it):
        publish_numbered(js, f"{stream_name}.x", _WRITES)
        oc._consumer_seq = 7  # as if the first messages had gone missing
        assert _next_values(it, _WRITES) == list(range(_WRITES))
    assert oc._serial >= 2


def test_ordered_consumer_restart_before_any_delivery(restartable_server):
    """After a server restart, writes made before the new link arrive."""
    with nats_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream()
        with _ordered_from_new(js, "RESUME") as (oc, it):
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            # publish once the stream is back: a retried batch could store some twice
            wait_for(lambda: js.stream("RESUME"), timeout=20, ignore=(nats_sync.NatsError,))
            publish_numbered(js, "RESUME.x", _WRITES, timeout=20)
            assert _next_values(it, _WRITES) == list(range(_WRITES))
        assert oc._serial >= 2


def test_ordered_consumer_missed_heartbeats_before_any_delivery(nats_server):
    """A stalled server: writes made before the replacement link exists arrive."""
    with nats_sync.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=1.0)
        with _ordered_from_new(js, "RESUMEHB", heartbeat=0.2) as (oc, it):
            serial = oc._serial
            with stopped(nats_server):
                with pytest.raises(nats_sync.TimeoutError):
                    it.next(timeout=3)  # notices the missed heartbeats, fails a reset
            publish_numbered(js, "RESUMEHB.x", _WRITES)
            assert _next_values(it, _WRITES) == list(range(_WRITES))
            assert oc._serial > serial + 1


# -- a Key-Value watch ----------------------------------------------------------------


def _watch_values(watcher: nats_sync.KeyWatcher, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        entry = watcher.next(timeout=30)
        assert entry is not None
        out.append(entry.value)
    return out


def _put_during_reset(kv: nats_sync.KeyValue) -> None:
    for i in range(1, _WRITES + 1):
        kv.put("k", b"%d" % i)


_EXPECTED = [b"%d" % i for i in range(1, _WRITES + 1)]


@pytest.mark.parametrize(
    "cause",
    [
        lambda js, kv, w: _delete_consumers(js, kv.stream_name),
        lambda js, kv, w: setattr(w._consumer, "_consumer_seq", 7),
    ],
    ids=["consumer_deleted", "sequence_gap"],
)
def test_watch_reset_before_any_update(
    js: nats_sync.JetStreamContext,
    cause: Callable[[nats_sync.JetStreamContext, nats_sync.KeyValue, nats_sync.KeyWatcher], None],
):
    """Every update of one key made around the reset arrives, not only the last one."""
    name = unique_stream_name("RESUMEKV")
    kv = js.create_key_value(bucket=name, history=10)
    try:
        with kv.watch() as w:
            assert w.next(timeout=5) is None
            cause(js, kv, w)
            _put_during_reset(kv)
            assert _watch_values(w, _WRITES) == _EXPECTED
    finally:
        js.delete_key_value(name)


def test_watch_server_restart_before_any_update(restartable_server):
    """Updates made after a restart and before the new link all arrive."""
    with nats_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        kv = nc.jetstream().create_key_value(bucket="RESUMEKV", history=10)
        with kv.watch() as w:
            assert w.next(timeout=5) is None
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            wait_for(lambda: kv.put("k", b"1"), timeout=20, ignore=(nats_sync.NatsError,))
            for i in range(2, _WRITES + 1):
                kv.put("k", b"%d" % i)
            assert _watch_values(w, _WRITES) == _EXPECTED


@pytest.mark.slow
def test_watch_missed_heartbeats_before_any_update(nats_server: NatsServer):
    """A stalled server (the watch's heartbeats stop): updates made meanwhile all arrive."""
    with nats_sync.connect(nats_server.url) as nc:
        kv = nc.jetstream(timeout=1.0).create_key_value(bucket="RESUMEHB", history=10)
        with kv.watch() as w:
            assert w.next(timeout=5) is None
            serial = w._consumer._serial
            with stopped(nats_server):
                with pytest.raises(nats_sync.TimeoutError):
                    w.next(timeout=14)  # two heartbeats missed, a reset attempted
            _put_during_reset(kv)
            assert _watch_values(w, _WRITES) == _EXPECTED
            assert w._consumer._serial > serial + 1


def test_ordered_fetch_rides_out_a_server_shutdown(restartable_server):
    """A server shutting down ends a waiting pull with "409 Server Shutdown"; the ordered
    consumer's fetch makes a new link for the time left instead of raising it, and gets
    what is published once the server is back."""
    with nats_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream()
        stream = js.create_stream(name="SHUTDOWN", subjects=["shutdown.>"])
        oc = stream.ordered_consumer()
        assert oc.fetch_no_wait(1) == []
        outcome: dict[str, object] = {}

        def fetch() -> None:
            try:
                outcome["got"] = [m.data for m in oc.fetch(1, timeout=60)]
            except Exception as exc:
                outcome["got"] = exc

        waiting = threading.Thread(target=fetch)
        waiting.start()
        try:
            wait_for(lambda: any(c.num_waiting for c in stream.consumers()), timeout=20)
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            wait_for(lambda: js.publish("shutdown.x", b"after"), timeout=20,
                     ignore=(nats_sync.NatsError,))  # fmt: skip
        finally:
            waiting.join(90)
        assert outcome["got"] == [b"after"], outcome
        oc.close()
