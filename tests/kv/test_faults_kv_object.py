"""Key-Value watchers and Object Store reads through a fault proxy.

The bucket is written by a client that talks to the server directly; the
client under test reads through the proxy while it cuts and stalls.
"""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest

import jetstream_sync
from tests.fixtures.faults import assert_works
from tests.fixtures.proxy import TO_CLIENT

OBJECT_SIZE = 3 << 20
CHUNK = 64 << 10


@pytest.fixture
def bucket(js):
    """A fresh KV bucket made by the direct client, deleted afterwards."""
    name = "faults_" + uuid.uuid4().hex[:8]
    kv = js.create_key_value(bucket=name, history=64)  # nothing evicted: 50 per key
    yield kv
    js.delete_key_value(name)


@pytest.fixture
def store(js):
    """A fresh Object Store bucket holding a 3 MiB object ``big``, deleted afterwards."""
    name = "faults_" + uuid.uuid4().hex[:8]
    obs = js.create_object_store(bucket=name)
    data = hashlib.sha256(b"seed").digest() * (OBJECT_SIZE // 32)
    obs.put("big", data, chunk_size=CHUNK)
    yield obs, data
    js.delete_object_store(name)


def test_kv_watcher_sees_every_update_once_in_order(fault_proxy, fault_client, events, bucket):
    """A watcher across a cut, a mid-frame cut and a stale stall: each update once, in order."""
    watched = fault_client.jetstream(timeout=2).key_value(bucket.bucket)
    revisions: list[int] = []
    with watched.watch(timeout=5) as watcher:
        assert watcher.next(timeout=5) is None  # an empty bucket: the initial values are done
        for batch in range(8):
            if batch == 2:
                fault_proxy.cut()
            elif batch == 4:
                fault_proxy.cut_after(700, TO_CLIENT)
            elif batch == 6:
                fault_proxy.stall()
                events.wait(lambda e: e.disconnects == 3, timeout=5)
                fault_proxy.resume()
            for i in range(batch * 25, batch * 25 + 25):
                bucket.put(f"k.{i % 4}", b"%d" % i)
            for i in range(batch * 25, batch * 25 + 25):
                entry = watcher.next(timeout=10)
                assert (entry.key, entry.value) == (f"k.{i % 4}", b"%d" % i)
                revisions.append(entry.revision)
    assert revisions == list(range(1, 201))
    assert events.disconnects == 3
    fault_proxy.wait(lambda p: p.cuts == 2)
    assert_works(fault_client)


def test_object_get_cut_mid_transfer_is_right_or_typed_then_a_retry_works(
    fault_proxy, fault_client, store
):
    """A get whose link is cut in the middle of the chunks returns the right bytes or raises
    a typed error; the next get returns the right bytes."""
    obs, data = store
    remote = fault_client.jetstream(timeout=2).object_store(obs.bucket)
    fault_proxy.cut_after(OBJECT_SIZE // 3, TO_CLIENT)
    try:
        assert remote.get("big", timeout=2) == data
    except jetstream_sync.NatsError as exc:
        assert isinstance(exc, (jetstream_sync.TimeoutError, jetstream_sync.ConnectionLostError))
    fault_proxy.wait(lambda p: p.cuts == 1)
    assert remote.get("big", timeout=5) == data


def test_object_get_stalled_mid_transfer_fails_typed_within_its_timeout(
    fault_proxy, fault_client, events, store
):
    """A get whose link stalls for good raises TimeoutError within a few of its timeouts
    (never hangs); once the link is back a retry returns the right bytes."""
    obs, data = store
    remote = fault_client.jetstream(timeout=1).object_store(obs.bucket)
    fault_proxy.stall_after(OBJECT_SIZE // 3, TO_CLIENT)
    started = time.monotonic()
    with pytest.raises(jetstream_sync.TimeoutError):
        remote.get("big", timeout=1)
    assert time.monotonic() - started < 5
    fault_proxy.resume()
    events.wait(lambda e: e.reconnects >= 1)
    assert remote.get("big", timeout=5) == data
    assert_works(fault_client)


def test_kv_conditional_write_retried_after_a_lost_ack_is_refused(
    fault_proxy, fault_client, events, bucket
):
    """An update/create whose ack was lost was applied: its retry raises the conflict
    (KeyWrongLastSequenceError, KeyExistsError), and get() shows the value was ours."""
    remote = fault_client.jetstream(timeout=2).key_value(bucket.bucket)
    rev = bucket.put("k", b"1")
    unknown = (jetstream_sync.TimeoutError, jetstream_sync.ConnectionLostError)
    for attempt, write in enumerate(
        [lambda: remote.update("k", b"2", last=rev), lambda: remote.create("new", b"2")]
    ):
        fault_proxy.stall(directions=(TO_CLIENT,))  # the write gets through, its ack does not
        with pytest.raises(unknown):
            write()
        fault_proxy.resume()
        events.wait(lambda e, n=attempt + 1: e.reconnects >= n)
        with pytest.raises(jetstream_sync.KeyWrongLastSequenceError) as refused:
            write()
        assert isinstance(refused.value, jetstream_sync.KeyExistsError) == (attempt == 1)
    assert bucket.get("k").value == bucket.get("new").value == b"2"
    assert [e.value for e in bucket.history("k")] == [b"1", b"2"]
