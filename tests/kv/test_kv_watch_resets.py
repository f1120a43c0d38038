"""A watch hands out every revision after a reset, and a reset leaves one server-side link.

The shapes a user meets: the watcher's consumer deleted (by an operator, a
limit, a restart) while several updates are written before the next call;
a bucket keeping one revision per key, so that updates not followed at once
are gone for good; the marker of the initial values on a consumer whose
creation reply says nothing is pending; and links counted on the server
after resets and after ``stop()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import attrs
import pytest

import jetstream_sync as nats_sync
from jetstream_sync.jetstream.info import ConsumerInfo
from jetstream_sync.jetstream.ordered import OrderedConsumer
from tests.fixtures.jetstream import publish_numbered, unique_stream_name
from tests.fixtures.polling import wait_for

_WRITES = 5


@pytest.fixture
def kv1(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.KeyValue]:
    """A fresh bucket keeping 64 revisions per key (every one a test writes), deleted afterwards.

    A watch may rightly miss a revision the bucket has dropped: a busy server can
    store the next writes before it delivers one (on a loaded machine, with two
    revisions kept, even a waiting pull missed some). Keeping them all, the tests
    require every one.
    """
    name = unique_stream_name("WRESET")
    yield js.create_key_value(bucket=name, history=64)
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


def _links(js: nats_sync.JetStreamContext, stream: str) -> list[str]:
    return sorted(js.consumer_names(stream))


def _until_links(js: nats_sync.JetStreamContext, stream: str, count: int, when: str) -> None:
    """Wait until ``stream`` lists ``count`` consumers (deletes are not answered at once)."""
    wait_for(
        lambda: len(_links(js, stream)) == count,
        timeout=10,
        message=lambda: f"{count} link(s) {when}, not {_links(js, stream)}",
    )


def _replace_links(js: nats_sync.JetStreamContext, stream: str) -> None:
    """Delete every consumer of ``stream``; wait until a new one has a pull waiting."""
    old = set(_links(js, stream))
    assert old, "no link to delete"
    for name in old:
        js.delete_consumer(stream, name)

    def replaced() -> bool:
        now = set(_links(js, stream))
        return len(now) == 1 and not now & old and js.consumer_info(stream, *now).num_waiting > 0

    wait_for(
        replaced,
        timeout=20,
        ignore=nats_sync.ConsumerNotFoundError,
        message=f"the watcher to replace its deleted consumer {sorted(old)} on its own",
    )


def _until_marker(w: nats_sync.KeyWatcher) -> list[bytes]:
    out = []
    while (entry := w.next(timeout=10)) is not None:
        out.append(entry.value)
    return out


_MODES: dict[str, Callable[[nats_sync.KeyValue], nats_sync.KeyWatcher]] = {
    "latest": lambda kv: kv.watch(),
    "all_keys": lambda kv: kv.watch(">"),
    "filtered": lambda kv: kv.watch(["k", "other.*"]),
    "updates_only": lambda kv: kv.watch(updates_only=True),
    "include_history": lambda kv: kv.watch(include_history=True),
    "ignore_deletes": lambda kv: kv.watch(ignore_deletes=True),
}


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_updates_after_a_deleted_consumer_all_arrive(js, kv1, mode):
    """Five updates written after the consumer's deletion, before any next(): all five."""
    kv1.put("k", b"0")
    with _MODES[mode](kv1) as w:
        initial = _until_marker(w)
        assert initial == ([] if mode == "updates_only" else [b"0"])
        _replace_links(js, kv1.stream_name)
        for i in range(1, _WRITES + 1):
            kv1.put("k", b"%d" % i)
        assert [w.next(timeout=10).value for _ in range(_WRITES)] == [
            b"%d" % i for i in range(1, _WRITES + 1)
        ]
        assert len(_links(js, kv1.stream_name)) == 1


def test_fifty_unread_updates_across_a_deletion_all_arrive(js, kv1):
    """Updates alternating two keys, nothing read meanwhile, the consumer deleted midway."""
    with kv1.watch() as w:
        assert w.next(timeout=5) is None
        for i in range(1, 26):
            kv1.put("a" if i % 2 else "b", b"%d" % i)
        _replace_links(js, kv1.stream_name)
        for i in range(26, 51):
            kv1.put("a" if i % 2 else "b", b"%d" % i)
        got = [w.next(timeout=10).value for _ in range(50)]
        assert got == [b"%d" % i for i in range(1, 51)]
        with pytest.raises(nats_sync.TimeoutError):
            w.next(timeout=0)


def test_next_with_timeout_zero_takes_only_what_is_here(kv1):
    """``timeout=0`` returns a buffered entry or raises TimeoutError at once."""
    with kv1.watch() as w:
        assert w.next(timeout=0) is None  # the marker of an empty bucket is already here
        with pytest.raises(nats_sync.TimeoutError):
            w.next(timeout=0)
        kv1.put("k", b"1")
        entry = wait_for(
            lambda: w.next(timeout=0), ignore=nats_sync.TimeoutError, message="the put to arrive"
        )
        assert entry.value == b"1"


def test_marker_ignores_a_creation_reply_that_says_nothing_is_pending(js, kv1, monkeypatch):
    """A consumer on a lagging replica reports 0 pending: the marker still follows the values."""
    for key in ("a", "b", "c"):
        kv1.put(key, key.encode())
    real = OrderedConsumer.cached_info

    def lagging(self: OrderedConsumer) -> ConsumerInfo | None:
        info = real.fget(self)  # type: ignore[attr-defined]
        return None if info is None else attrs.evolve(info, num_pending=0)

    monkeypatch.setattr(OrderedConsumer, "cached_info", property(lagging))
    with kv1.watch() as w:
        assert _until_marker(w) == [b"a", b"b", b"c"]


# -- one link on the server -------------------------------------------------------------


def test_watch_resets_leave_one_link_and_stop_leaves_none(js, kv1):
    """Three deletions and three sequence gaps later, one link; after stop(), none."""
    w = kv1.watch()
    assert w.next(timeout=5) is None
    for i in range(3):
        _replace_links(js, kv1.stream_name)
        kv1.put("k", b"d%d" % i)
        assert w.next(timeout=10).value == b"d%d" % i
    for i in range(3):
        w._consumer._consumer_seq += 5  # the next message looks like a gap: a reset
        kv1.put("k", b"g%d" % i)
        assert w.next(timeout=10).value == b"g%d" % i
    _until_links(js, kv1.stream_name, 1, "after the resets")
    w.stop()
    _until_links(js, kv1.stream_name, 0, "after stop()")


@pytest.mark.parametrize("way", ["fetch", "next", "messages", "consume"])
def test_ordered_consumer_gaps_leave_one_link(js, stream_name, way):
    """Each way of pulling: after three resets one link is listed, none after close()."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    oc = stream.ordered_consumer()
    got: list[int] = []
    consumed: list[int] = []
    iterator = oc.messages(max_messages=10, expires=2) if way == "messages" else None
    ctx = oc.consume(lambda m: consumed.append(int(m.data))) if way == "consume" else None

    def take(n: int) -> None:
        if way == "fetch":
            while len(got) < n:
                got.extend(int(m.data) for m in oc.fetch(n - len(got), timeout=5))
        elif way == "next":
            got.extend(int(oc.next(timeout=5).data) for _ in range(n - len(got)))
        elif way == "messages":
            assert iterator is not None
            got.extend(int(iterator.next(timeout=5).data) for _ in range(n - len(got)))
        else:
            wait_for(lambda: len(consumed) >= n, timeout=10, message="the consume callback")
            got[:] = consumed

    total = 0
    for _ in range(3):
        publish_numbered(js, f"{stream_name}.x", 2, start=total)
        total += 2
        take(total)
        oc._consumer_seq += 5  # the next message looks like a gap
    publish_numbered(js, f"{stream_name}.x", 2, start=total)
    total += 2
    take(total)
    assert got == list(range(total))
    _until_links(js, stream_name, 1, "after the resets")
    if ctx is not None:
        ctx.stop()
    if iterator is not None:
        iterator.stop()
    oc.close()
    _until_links(js, stream_name, 0, "after close()")


def test_reconnects_leave_one_link(fault_client, fault_proxy, events):
    """Three cut connections (the server keeps the old links): one link, none after stop()."""
    js = fault_client.jetstream()
    name = unique_stream_name("WRECON")
    kv = js.create_key_value(bucket=name)
    try:
        w = kv.watch()
        assert w.next(timeout=5) is None
        for i in range(3):
            reconnects = events.reconnects
            fault_proxy.cut()
            events.wait(lambda e, n=reconnects: e.reconnects > n, timeout=20)
            wait_for(lambda i=i: kv.put("k", b"%d" % i), timeout=20, ignore=nats_sync.NatsError)
            assert w.next(timeout=20).value == b"%d" % i
        _until_links(js, kv.stream_name, 1, "after the resets")
        w.stop()
        _until_links(js, kv.stream_name, 0, "after stop()")
    finally:
        js.delete_key_value(name)


# -- a purge under the initial values -----------------------------------------------------

# More keys than the watcher holds ahead of its reader (10,000) and pulls (1,000): the
# server-side consumer still has initial values to deliver when the purge comes.
_MANY_KEYS = 15_000


def _many_keys(js: nats_sync.JetStreamContext, kv: nats_sync.KeyValue) -> None:
    for i in range(_MANY_KEYS):
        js.publish_async(f"$KV.{kv.bucket}.k{i}", b"v")
    js.publish_async_completed(timeout=30)


@pytest.mark.parametrize(
    "purge", [{}, {"seq": _MANY_KEYS // 2}], ids=["whole_stream", "older_half"]
)
def test_updates_after_a_purge_of_the_initial_values_arrive(js, kv1, purge):
    """The bucket's stream purged while the initial values are read: the rest, the marker and
    the next update arrive (nats-server stops a "last per subject" consumer for good)."""
    _many_keys(js, kv1)
    with kv1.watch() as w:
        assert w.next(timeout=10) is not None
        js.stream(kv1.stream_name).purge(**purge)
        keys = set()
        while (entry := w.next(timeout=10)) is not None:
            keys.add(entry.key)
        assert {f"k{i}" for i in range(purge.get("seq", _MANY_KEYS), _MANY_KEYS)} <= keys
        kv1.put("after", b"new")
        assert w.next(timeout=10).value == b"new"
