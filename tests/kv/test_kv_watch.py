"""KV watch, keys, history and purge_deletes; a watcher that survives restarts and deletions."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

import jetstream_sync as nats_sync
from jetstream_sync import KeyValueOp
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import interrupted_at


@pytest.fixture
def kv(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.KeyValue]:
    """A fresh bucket keeping 10 revisions per key, deleted afterwards."""
    name = unique_stream_name("WATCH")
    yield js.create_key_value(bucket=name, history=10)
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


def _until_marker(watcher: nats_sync.KeyWatcher) -> list[nats_sync.KeyValueEntry]:
    out = []
    while (entry := watcher.next(timeout=5)) is not None:
        out.append(entry)
    return out


def test_empty_bucket_gives_the_marker_at_once(kv):
    """On an empty bucket None comes first, then updates as they happen."""
    with kv.watch() as w:
        assert next(w) is None  # the builtin next() works too
        rev = kv.put("a", b"1")
        entry = w.next(timeout=5)
        assert (entry.key, entry.value, entry.revision, entry.delta) == ("a", b"1", rev, 0)


def test_initial_latest_values_then_marker_then_updates(kv):
    """The latest entry of each key (markers included) in revision order, None, then updates."""
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.delete("b")
    with kv.watch() as w:
        initial = _until_marker(w)
        assert [(e.key, e.value, e.operation) for e in initial] == [
            ("a", b"2", KeyValueOp.PUT),
            ("b", b"", KeyValueOp.DEL),
        ]
        assert initial[-1].delta == 0
        kv.purge("a")
        update = w.next(timeout=5)
        assert (update.key, update.operation) == ("a", KeyValueOp.PURGE)


def test_options_history_ignore_deletes_meta_only(kv):
    """include_history, ignore_deletes and meta_only shape what is delivered."""
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"x")
    kv.delete("b")
    with kv.watch(include_history=True) as w:
        assert [e.value for e in _until_marker(w)] == [b"1", b"2", b"x", b""]
    with kv.watch(ignore_deletes=True) as w:
        assert [e.key for e in _until_marker(w)] == ["a"]
    with kv.watch(meta_only=True) as w:
        entries = _until_marker(w)
        assert [(e.key, e.value) for e in entries] == [("a", b""), ("b", b"")]
        assert entries[0].revision == 2


def test_updates_only_and_filters(kv):
    """updates_only starts after what is stored; filters (literal, *, >, a list) work."""
    kv.put("cfg.a", b"old")
    with kv.watch("cfg.*", updates_only=True) as w:
        assert w.next(timeout=1) is None
        kv.put("other", b"x")
        kv.put("cfg.a", b"new")
        assert w.next(timeout=5).value == b"new"
    kv.put("cfg.b.c", b"deep")
    with kv.watch(["other", "cfg.>"]) as w:
        assert sorted(e.key for e in _until_marker(w)) == ["cfg.a", "cfg.b.c", "other"]
    with kv.watch("cfg.*") as w:
        assert [e.key for e in _until_marker(w)] == ["cfg.a"]
    with pytest.raises(nats_sync.InvalidKeyError):
        kv.watch("cfg.>.a")
    with kv.watch("cfg*") as w:  # a literal key: * is a wildcard only as a whole token
        assert w.next(timeout=5) is None
    with pytest.raises(ValueError):
        kv.watch(include_history=True, updates_only=True)


def test_resume_from_revision_gives_every_revision_from_there_then_the_marker(kv):
    """resume_from_revision delivers every stored revision from that one on (superseded
    values and markers too, filters applied), then None, then updates."""
    kv.put("a", b"1")  # 1
    kv.put("b", b"1")  # 2
    kv.put("a", b"2")  # 3
    kv.delete("b")  # 4
    with kv.watch(resume_from_revision=2) as w:
        got = [(e.key, e.value, e.revision, e.operation) for e in _until_marker(w)]
        assert got == [
            ("b", b"1", 2, KeyValueOp.PUT),
            ("a", b"2", 3, KeyValueOp.PUT),
            ("b", b"", 4, KeyValueOp.DEL),
        ]
        kv.put("c", b"1")
        assert w.next(timeout=5).revision == 5
    with kv.watch("a", resume_from_revision=2) as w:
        assert [e.revision for e in _until_marker(w)] == [3]
    with kv.watch(resume_from_revision=1, ignore_deletes=True, meta_only=True) as w:
        assert [(e.revision, e.value) for e in _until_marker(w)] == [
            (1, b""), (2, b""), (3, b""), (5, b""),
        ]  # fmt: skip


def test_resume_from_revision_skips_what_the_bucket_no_longer_holds(kv):
    """Revisions a purge removed are not delivered: the watch starts at the first one the
    bucket still holds."""
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"1")
    kv.purge("a")  # 4, removes 1 and 2
    with kv.watch(resume_from_revision=1) as w:
        got = [(e.revision, e.key, e.operation) for e in _until_marker(w)]
        assert got == [(3, "b", KeyValueOp.PUT), (4, "a", KeyValueOp.PURGE)]


def test_resume_from_revision_past_the_newest_gives_the_marker_first(kv):
    """Resuming after the newest revision (the last one handled plus one) gives None at
    once, then the next update."""
    last = kv.put("a", b"1")
    with kv.watch(resume_from_revision=last + 1) as w:
        assert w.next(timeout=5) is None
        rev = kv.put("a", b"2")
        assert w.next(timeout=5).revision == rev == last + 1


def test_resume_from_revision_survives_the_deletion_of_its_consumer(js, kv):
    """A resumed watch whose consumer is deleted goes on after the last revision it
    handed out, like any other."""
    for i in range(5):
        kv.put(f"k{i}", b"%d" % i)
    with kv.watch(resume_from_revision=3) as w:
        assert [e.revision for e in _until_marker(w)] == [3, 4, 5]
        stream = js.stream(f"KV_{kv.bucket}")
        for name in stream.consumer_names():
            stream.delete_consumer(name)
        kv.put("k0", b"new")
        assert w.next(timeout=15).revision == 6
        assert stream.info().state.consumer_count == 1


@pytest.mark.parametrize(
    ("revision", "error"),
    [(0, ValueError), (-1, ValueError), (2**64, ValueError), (True, TypeError),
     (1.0, TypeError), ("3", TypeError)],
)  # fmt: skip
def test_a_bad_resume_from_revision_is_refused_before_anything_is_made(js, kv, revision, error):
    """A resume_from_revision that is no stream sequence, or one with updates_only, is
    refused before a consumer is made."""
    with pytest.raises(error, match="resume_from_revision"):
        kv.watch(resume_from_revision=revision)
    with pytest.raises(ValueError, match="resume_from_revision and updates_only"):
        kv.watch(resume_from_revision=1, updates_only=True)
    assert js.stream(f"KV_{kv.bucket}").info().state.consumer_count == 0


def test_iteration_and_stop_from_another_thread(kv):
    """Iterating blocks; stop() from another thread ends the loop."""
    kv.put("a", b"1")
    w = kv.watch()
    seen = []

    def read():
        seen.extend(w)

    t = threading.Thread(target=read)
    t.start()
    wait_for(lambda: len(seen) == 2)
    w.stop()
    t.join(5)
    assert not t.is_alive() and seen[0].key == "a" and seen[1] is None


def test_keys(kv):
    """keys() lists live keys once each, filtered on the server; [] when there are none."""
    assert kv.keys() == []
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b.x", b"1")
    kv.put("b.y", b"1")
    kv.put("c", b"1")
    kv.delete("c")
    assert kv.keys() == ["a", "b.x", "b.y"]
    assert kv.keys("b.*") == ["b.x", "b.y"]
    assert kv.keys(["a", "b.>"]) == ["a", "b.x", "b.y"]
    assert kv.keys("nothing.>") == []


def test_history(kv):
    """history() returns every kept revision of one key, markers included."""
    kv.put("k", b"1")
    kv.put("other", b"x")
    kv.put("k", b"2")
    kv.delete("k")
    entries = kv.history("k")
    assert [(e.value, e.operation) for e in entries] == [
        (b"1", KeyValueOp.PUT), (b"2", KeyValueOp.PUT), (b"", KeyValueOp.DEL),
    ]  # fmt: skip
    assert [e.delta for e in entries] == [2, 1, 0]
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.history("never")


def test_purge_deletes(kv):
    """purge_deletes removes markers (and what they hide); recent ones keep their marker."""
    kv.put("a", b"1")
    kv.delete("a")
    kv.put("b", b"1")
    kv.purge("b")
    kv.put("live", b"1")
    assert kv.purge_deletes() == 2  # both markers are recent: only older data goes
    assert [e.key for e in kv.history("a")] == ["a"]
    assert kv.purge_deletes(older_than=-1) == 2
    assert kv.status().values == 1
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.history("a")


@pytest.mark.parametrize(
    ("older_than", "error"),
    [(float("nan"), ValueError), (float("inf"), ValueError), (1e300, ValueError),
     ("30", TypeError), (True, TypeError)],
)  # fmt: skip
def test_purge_deletes_refuses_a_bad_older_than_before_sending_anything(nc, kv, older_than, error):
    """A bad older_than is a typed error before the listing, not after it (or 1 s for True)."""
    kv.put("a", b"1")
    kv.delete("a")
    sent = nc.stats.out_msgs
    with pytest.raises(error, match="older_than"):
        kv.purge_deletes(older_than=older_than)
    assert nc.stats.out_msgs == sent
    assert [e.operation for e in kv.history("a")] == [KeyValueOp.PUT, KeyValueOp.DEL]


def test_marker_comes_when_the_newest_initial_entry_is_removed_before_delivery(nc, js, kv):
    """None still comes, and keys() answers, when the entry that ended the initial values
    at the start is purged before the watcher got to it."""
    many = 15_000  # more than a watcher buffers unread: the last entry waits for the reader
    for i in range(many):
        nc.publish(f"$KV.{kv.bucket}.k{i}", b"v")
    kv.put("last", b"x")
    stream = js.stream(f"KV_{kv.bucket}")
    with kv.watch(timeout=5) as w:
        stream.purge(subject=f"$KV.{kv.bucket}.last")
        assert len(_until_marker(w)) == many
        rev = kv.put("after", b"1")
        assert w.next(timeout=5).revision == rev
    kv.put("last", b"y")
    with kv.watch(timeout=5) as w:
        stream.purge(subject=f"$KV.{kv.bucket}.last")
        assert len(w.initial()) == many + 1  # what keys() and history() read


def _collect(watcher, seen, until):
    while len(seen) < until:
        entry = watcher.next(timeout=30)
        if entry is not None:
            seen.append(entry)


def test_watch_survives_the_deletion_of_its_consumer(js, kv):
    """Deleting the watcher's consumer mid-stream: every update arrives in order, once."""
    with kv.watch() as w:
        assert w.next(timeout=1) is None
        seen: list[nats_sync.KeyValueEntry] = []
        revs = [kv.put(f"k{i % 7}", b"%d" % i) for i in range(20)]
        _collect(w, seen, 20)
        for name in js.consumer_names(kv.stream_name):
            js.delete_consumer(kv.stream_name, name)
        revs += [kv.put(f"k{i % 7}", b"%d" % i) for i in range(20, 40)]
        _collect(w, seen, 40)
        revs += [kv.put("last", b"x")]
        _collect(w, seen, 41)
        assert [e.revision for e in seen] == revs


def test_watch_survives_a_server_restart(restartable_server):
    """Across a restart (file storage) the watcher delivers every update in order, once."""
    with nats_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        ctx = nc.jetstream()
        kv = ctx.create_key_value(bucket="RESTART", history=5)
        kv.put("before", b"0")
        with kv.watch() as w:
            assert w.next(timeout=5).key == "before"
            assert w.next(timeout=5) is None
            seen: list[nats_sync.KeyValueEntry] = []
            revs = [kv.put(f"k{i % 3}", b"%d" % i) for i in range(10)]
            _collect(w, seen, 5)
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            # write once the bucket's stream is back, so no put is retried after being stored
            wait_for(lambda: kv.status(), timeout=20, ignore=(nats_sync.NatsError,))
            revs += [
                wait_for(lambda i=i: kv.put(f"k{i % 3}", b"%d" % i), timeout=20,
                         ignore=(nats_sync.NatsError,))
                for i in range(10, 20)
            ]  # fmt: skip
            _collect(w, seen, 20)
            assert [e.revision for e in seen] == revs
            assert [e.value for e in seen] == [b"%d" % i for i in range(20)]


def test_consumer_deleted_during_the_initial_values(js):
    """A deletion mid-way through the initial values: each key once, in order, then None once."""
    name = unique_stream_name("WATCHINIT")
    kv = js.create_key_value(bucket=name)
    try:
        for i in range(2000):
            js.publish_async(f"$KV.{name}.k{i}", b"%d" % i)
        js.publish_async_completed(timeout=30)
        seen = []
        # The deletion may be noticed only by missed heartbeats (2 x 5 s) when no pull
        # request was waiting for the server to answer with 409: allow for that and the new link.
        with kv.watch() as w:
            while (entry := w.next(timeout=30)) is not None:
                seen.append(entry.key)
                if len(seen) == 500:
                    for consumer in js.consumer_names(kv.stream_name):
                        js.delete_consumer(kv.stream_name, consumer)
            kv.put("after", b"x")
            assert w.next(timeout=30).key == "after"
        assert seen == [f"k{i}" for i in range(2000)]
    finally:
        js.delete_key_value(name)


def test_watching_a_deleted_bucket(js):
    """Watching a deleted bucket, or one deleted under the watcher: BucketNotFoundError."""
    name = unique_stream_name("WATCHGONE")
    kv = js.create_key_value(bucket=name)
    kv.put("a", b"1")
    w = kv.watch()
    try:
        assert w.next(timeout=5).key == "a"
        assert w.next(timeout=5) is None
        js.delete_key_value(name)
        with pytest.raises(nats_sync.BucketNotFoundError):
            w.next(timeout=10)
    finally:
        w.stop()
    for call in (kv.watch, kv.keys, lambda: kv.watch(updates_only=True)):
        with pytest.raises(nats_sync.BucketNotFoundError):
            call()


def test_a_bucket_deleted_and_made_again_under_the_watcher_is_not_followed(js):
    """The new bucket's revisions start at 1 again: resuming after the old last revision
    would skip its first ones and hand out the rest as if nothing happened."""
    name = unique_stream_name("WATCHAGAIN")
    kv = js.create_key_value(bucket=name)
    for i in range(5):
        kv.put(f"k{i}", b"old")
    try:
        with kv.watch() as w:
            assert len(_until_marker(w)) == 5
            # The watcher's new link is made only once the bucket is back (as when its
            # deletion is noticed late, by missed heartbeats).
            with w._consumer._lock:
                js.delete_key_value(name)
                again = js.create_key_value(bucket=name)
                for i in range(8):
                    again.put("new", b"%d" % i)
            with pytest.raises(nats_sync.BucketNotFoundError, match="made again"):
                w.next(timeout=30)
    finally:
        with contextlib.suppress(nats_sync.BucketNotFoundError):
            js.delete_key_value(name)


def test_next_interrupted_at_any_point_keeps_the_watch_going(kv):
    """Ctrl-C on the main thread at each point of ``next()`` in turn (a notebook cell
    stopped while it waits): the watcher's lock is never left held, so its thread keeps
    feeding it, and the next calls get the updates written after; ``stop()`` returns."""
    with kv.watch() as w:
        assert w.next(timeout=5) is None
        point = 0
        while True:
            point += 1
            kv.put("k", b"%d" % point)
            done = not interrupted_at(point, lambda: w.next(timeout=5))
            lock = w._feed._lock  # taken for a moment by the watcher's thread too
            assert lock.acquire(timeout=5), f"left locked at point {point}"
            lock.release()
            if done:
                break
            after = kv.put("k", b"after %d" % point)  # the interrupted call may have taken rev
            entry = w.next(timeout=5)
            while entry is not None and entry.revision < after:
                entry = w.next(timeout=5)
            assert entry is not None and entry.revision == after
        assert point > 2


def test_a_watch_past_the_consumer_limit_is_refused_and_leaves_nothing(js, kv):
    """Each watcher is a consumer on the bucket's stream: past its ``max_consumers`` a watch
    raises MaximumConsumersLimitError and starts no thread; once a watcher stopped, a new
    watch fits again."""
    kv.put("k", b"1")
    stream_name = f"KV_{kv.bucket}"
    js.update_stream(js.stream(stream_name).info().config, max_consumers=2)
    with kv.watch() as first, kv.watch():
        before = set(threading.enumerate())
        with pytest.raises(nats_sync.MaximumConsumersLimitError) as refused:
            kv.watch()
        assert refused.value.stream == stream_name
        assert set(threading.enumerate()) - before == set()
        first.stop()
        wait_for(lambda: js.stream(stream_name).info().state.consumer_count == 1)
        with kv.watch("k") as third:
            assert third.next(timeout=5).value == b"1"


def test_a_running_watch_waits_for_room_to_replace_its_consumer(js, kv):
    """A watcher whose consumer is deleted while the stream holds as many consumers as it
    may keeps trying to replace it (only a new watch is refused at once), and once another
    consumer stopped it delivers what was written meanwhile."""
    kv.put("k", b"1")
    stream = js.stream(f"KV_{kv.bucket}")
    with kv.watch("k") as watcher:
        assert [e.value for e in _until_marker(watcher)] == [b"1"]
        stream.create_consumer(durable_name="filler")
        js.update_stream(stream.info().config, max_consumers=1)
        errors_before = js.account_info().api.errors
        for name in list(stream.consumer_names()):
            if name != "filler":
                stream.delete_consumer(name)
        kv.put("k", b"2")
        # deleting the link it lost and a first new one refused: two failed API calls
        wait_for(lambda: js.account_info().api.errors >= errors_before + 2, timeout=10)
        stream.delete_consumer("filler")
        assert watcher.next(timeout=10).value == b"2"
