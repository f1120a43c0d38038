"""A reset while the initial values are delivered leaves them "last per subject".

A watch starts on a "last per subject" consumer; a replacement link starts at
the stream sequence after the last one delivered, and from there the stream
holds every revision, superseded ones and markers too. The initial values must
still be each key once, at its latest revision, in revision order, a marker
only where the latest revision is one: for ``watch()``, ``keys()`` and
``purge_deletes()``.

The bucket of the first tests holds more keys than the watcher buffers ahead of its reader (10,000)
plus one pull (1,000), so the consumer deleted after the first entry is read
still had initial values to deliver; the superseded revisions lie after those.
The last tests reset before anything was delivered, as on a cluster whose first
pull after the consumer's creation finds no responders.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import jetstream_sync as nats_sync
from jetstream_sync._deadline import Deadline
from jetstream_sync.jetstream.ordered import OrderedMessageIterator
from jetstream_sync.kv.watch import KeyWatcher
from tests.fixtures.jetstream import drop_the_first_pull, unique_stream_name
from tests.fixtures.polling import wait_for

_KEYS = 15_000
# Revisions past the first 13,000 stream sequences: never reached before the deletion.
_LATE = 13_000

Model = dict[str, tuple[str, bytes]]


@pytest.fixture
def kv(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.KeyValue]:
    """A fresh bucket keeping every revision a test writes, deleted afterwards."""
    name = unique_stream_name("WINIT")
    yield js.create_key_value(bucket=name, history=8)
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


def _fill(js: nats_sync.JetStreamContext, kv: nats_sync.KeyValue) -> Model:
    """Write keys, later revisions, deletes, purges and re-puts; return the latest of each key
    (operation, value), in the order of their latest revisions."""
    model: Model = {}

    def write(key: str, op: str, value: bytes = b"") -> None:
        headers = None
        if op == "DEL":
            headers = {"KV-Operation": "DEL"}
        elif op == "PURGE":
            headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
        js.publish_async(f"$KV.{kv.bucket}.{key}", value, headers=headers)
        model.pop(key, None)
        model[key] = (op, value)

    for i in range(_KEYS):
        write(f"k{i}", "PUT", b"v1")
    for i in range(_KEYS - 1, _LATE, -2):  # a second value, newest key first
        write(f"k{i}", "PUT", b"v2")
    for i in range(_LATE, _LATE + 200):
        write(f"k{i}", "DEL")
    for i in range(_LATE + 200, _LATE + 300):
        write(f"k{i}", "PURGE")
    for i in range(_LATE + 300, _LATE + 400):  # deleted, then a value again
        write(f"k{i}", "DEL")
        write(f"k{i}", "PUT", b"v3")
    js.publish_async_completed(timeout=60)
    return model


def _links(js: nats_sync.JetStreamContext, stream: str) -> set[str]:
    return set(js.consumer_names(stream))


def _delete_links(js: nats_sync.JetStreamContext, stream: str) -> set[str]:
    """Delete every consumer of ``stream`` (the watcher's); return their names."""
    old = _links(js, stream)
    assert old, "no link to delete"
    for name in old:
        with contextlib.suppress(nats_sync.ConsumerNotFoundError):
            js.delete_consumer(stream, name)
    return old


def _check_replaced(js: nats_sync.JetStreamContext, stream: str, old: set[str]) -> None:
    """The watcher did replace its deleted consumer (the test reset what it meant to)."""
    wait_for(
        lambda: _links(js, stream) and not _links(js, stream) & old,
        timeout=20,
        message=f"a new link instead of {sorted(old)}",
    )


_WATCHES = {
    "plain": {},
    "ignore_deletes": {"ignore_deletes": True},
    "meta_only": {"meta_only": True},
}


@pytest.mark.parametrize("options", sorted(_WATCHES))
def test_initial_values_after_a_mid_initial_reset_are_the_latest_per_key(js, kv, options):
    """The consumer deleted after the first entry: the initial values are still each key once,
    at its latest revision, in revision order, markers only where the latest is one."""
    model = _fill(js, kv)
    opts = _WATCHES[options]
    with kv.watch(**opts) as w:
        first = w.next(timeout=30)
        old = _delete_links(js, kv.stream_name)
        got = [first]
        while (entry := w.next(timeout=30)) is not None:
            got.append(entry)
        _check_replaced(js, kv.stream_name, old)
        kv.put("after", b"new")  # and the watch goes on with updates
        assert w.next(timeout=30).key == "after"
    expected = [
        (key, op, b"" if opts.get("meta_only") else value)
        for key, (op, value) in model.items()
        if op == "PUT" or not opts.get("ignore_deletes")
    ]
    seen = [(e.key, e.operation.value, e.value) for e in got]
    assert len(seen) == len(expected)
    assert seen == expected
    revisions = [e.revision for e in got]
    assert revisions == sorted(set(revisions))


def _delete_after_first_entry(js, kv, monkeypatch) -> list[set[str]]:
    """Make the first entry a watcher hands out delete its consumer (on the reading thread,
    so the rest of the initial values come through a new link); return the names deleted."""
    real = KeyWatcher.next
    deleted: list[set[str]] = []

    def next_then_delete(self: KeyWatcher, timeout: float | None = None):
        entry = real(self, timeout)
        if not deleted:
            deleted.append(_delete_links(js, kv.stream_name))
        return entry

    monkeypatch.setattr(KeyWatcher, "next", next_then_delete)
    return deleted


def test_keys_after_a_mid_initial_reset_lists_each_live_key_once_in_revision_order(
    js, kv, monkeypatch
):
    """keys() whose consumer is deleted midway: the keys holding a value, in revision order."""
    model = _fill(js, kv)
    deleted = _delete_after_first_entry(js, kv, monkeypatch)
    keys = kv.keys()
    assert deleted, "the listing's consumer was not deleted"
    expected = [key for key, (op, _) in model.items() if op == "PUT"]
    assert len(keys) == len(expected)
    assert keys == expected


def test_purge_deletes_after_a_mid_initial_reset_counts_only_latest_markers(js, kv, monkeypatch):
    """purge_deletes() whose listing is reset midway cleans the keys whose latest is a marker."""
    model = _fill(js, kv)
    deleted = _delete_after_first_entry(js, kv, monkeypatch)
    cleaned = kv.purge_deletes(older_than=-1)
    assert deleted, "the listing's consumer was not deleted"
    assert cleaned == sum(op != "PUT" for op, _ in model.values())
    monkeypatch.undo()
    assert kv.keys() == [key for key, (op, _) in model.items() if op == "PUT"]


# -- a reset before anything was delivered (the first pull finds no consumer) -------------


def _first_link_deleted_at_once(js, kv, monkeypatch) -> list[str]:
    """Delete the first ordered consumer link on the server right after its creation, so
    its first pull finds nobody (as on a cluster whose route has not yet learnt of it)."""
    real = OrderedMessageIterator._start
    deleted: list[str] = []

    def start(self: OrderedMessageIterator, deadline: Deadline | None) -> None:
        oc = self._oc
        if not deleted:
            current = oc._reset(deadline)
            js.delete_consumer(kv.stream_name, current.name)
            deleted.append(current.name)
        real(self, deadline)

    monkeypatch.setattr(OrderedMessageIterator, "_start", start)
    return deleted


def _fill_small(kv: nats_sync.KeyValue) -> None:
    """x, a, b, a again, c, c deleted: the latest are x, b, a and c's marker."""
    kv.put("x", b"1")
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.put("c", b"1")
    kv.delete("c")


def test_keys_after_a_reset_before_the_first_delivery(js, kv, monkeypatch):
    """keys() whose first pull finds no consumer: the live keys once each, in revision order."""
    _fill_small(kv)
    deleted = _first_link_deleted_at_once(js, kv, monkeypatch)
    assert kv.keys() == ["x", "b", "a"]
    assert len(deleted) == 1


def test_watch_after_a_reset_before_the_first_delivery(js, kv, monkeypatch):
    """watch() whose first pull finds no consumer: the latest of each key, then None."""
    _fill_small(kv)
    deleted = _first_link_deleted_at_once(js, kv, monkeypatch)
    with kv.watch() as w:
        got = []
        while (entry := w.next(timeout=30)) is not None:
            got.append((entry.key, entry.operation.value, entry.value))
    assert got == [("x", "PUT", b"1"), ("b", "PUT", b"1"), ("a", "PUT", b"2"), ("c", "DEL", b"")]
    assert len(deleted) == 1


def test_keys_whose_pull_the_server_drops_still_lists_within_its_timeout(nc, kv, monkeypatch):
    """The first pull of keys() lost without a word (as when its consumer is deleted while
    the request is on its way): a listing's heartbeats come at a quarter of its timeout, so
    the silence is noticed and the consumer replaced before the timeout ends (with the
    watch's 5 s heartbeat, only after 10 s)."""
    _fill_small(kv)
    dropped = drop_the_first_pull(nc, monkeypatch)
    assert kv.keys(timeout=8) == ["x", "b", "a"]
    assert dropped, "no pull was dropped"
