"""Key-Value and Object Store timeouts are checked at the call, whatever is ready or cached."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import jetstream_sync as nats_sync
from tests.fixtures.jetstream import unique_stream_name

_BAD = [float("nan"), float("inf"), -1.0]


@pytest.fixture
def kv(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.KeyValue]:
    """A bucket holding key ``k``, deleted afterwards."""
    name = unique_stream_name("TMO")
    kv = js.create_key_value(bucket=name, history=5)
    kv.put("k", b"1")
    yield kv
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


@pytest.fixture
def obs(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.ObjectStore]:
    """An object store holding object ``o``, deleted afterwards."""
    name = unique_stream_name("TMO")
    store = js.create_object_store(bucket=name)
    store.put("o", b"data")
    yield store
    with contextlib.suppress(nats_sync.ObjectStoreNotFoundError):
        js.delete_object_store(name)


@pytest.mark.parametrize("bad", _BAD, ids=repr)
def test_kv_watch_next_refuses_a_bad_timeout_with_the_marker_or_an_entry_ready(kv, bad):
    """The marker due and an entry buffered do not let a NaN, inf or negative timeout pass."""
    with kv.watch() as w:
        assert w.next(timeout=5).key == "k"
        with pytest.raises(ValueError):
            w.next(timeout=bad)  # the marker is due
        assert w.next(timeout=5) is None
        kv.put("k", b"2")
        kv.put("k", b"3")
        assert w.next(timeout=5).value == b"2"  # b"3" is buffered by now or soon
        with pytest.raises(ValueError):
            w.next(timeout=bad)
        assert w.next(timeout=5).value == b"3"


@pytest.mark.parametrize("bad", _BAD, ids=repr)
def test_object_watch_refuses_a_bad_timeout_at_set_up_and_with_the_marker_ready(obs, bad):
    """ObjectStore.watch(updates_only=True, timeout=bad) and next(timeout=bad) with the
    marker due raise ValueError."""
    with pytest.raises(ValueError):
        obs.watch(updates_only=True, timeout=bad)
    with obs.watch() as w:
        assert w.next(timeout=5).name == "o"
        with pytest.raises(ValueError):
            w.next(timeout=bad)  # the marker is due
        assert w.next(timeout=5) is None
