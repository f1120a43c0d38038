"""KV keys at the edges: the server's line limit, and keys other clients stored."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator

import attrs
import nats
import pytest

import jetstream_sync as nats_sync
from jetstream_sync.jetstream._watch_feed import initial_end
from tests.fixtures.in_flight import request_in_flight
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer


@pytest.fixture
def kv(js: nats_sync.JetStreamContext) -> Iterator[nats_sync.KeyValue]:
    """A fresh bucket keeping 5 revisions per key, deleted afterwards."""
    name = unique_stream_name("KEYS")
    yield js.create_key_value(bucket=name, history=5)
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


# -- the server's max_control_line ----------------------------------------------------


def test_a_too_long_key_fails_alone_and_spares_a_request_in_flight(nc, kv):
    """A key past the limit raises LimitExceededError naming "key" before anything is sent;
    another thread's request on the same client, in flight meanwhile, is answered."""
    with request_in_flight(nc), pytest.raises(nats_sync.LimitExceededError) as refused:
        kv.put("k" * 5000, b"v")
    assert refused.value.argument == "key"
    assert (refused.value.length, refused.value.limit) == (5000, nc.max_control_line)
    assert kv.put("after", b"1") >= 1


def test_a_key_at_the_limit_works_one_past_is_refused_by_every_call(nc, kv):
    """Every call takes a key of exactly max_key_length bytes; each refuses one byte more."""
    assert 3800 < kv.max_key_length < nc.max_control_line
    key = "k" * kv.max_key_length
    rev = kv.put(key, b"1")
    assert kv.get(key).revision == rev
    assert kv.update(key, b"2", last=rev) == rev + 1
    assert [e.value for e in kv.history(key)] == [b"1", b"2"]
    assert kv.keys(key) == [key]
    with kv.watch(key) as w:
        assert w.next(timeout=5).value == b"2"
    kv.delete(key)
    assert kv.create(key, b"3") > rev
    kv.purge(key)
    over = key + "k"
    calls = [
        lambda: kv.put(over, b"x"),
        lambda: kv.create(over, b"x"),
        lambda: kv.update(over, b"x", last=1),
        lambda: kv.get(over),
        lambda: kv.delete(over),
        lambda: kv.purge(over),
        lambda: kv.history(over),
        lambda: kv.keys(over),
        lambda: kv.watch(["a", over]),
    ]
    for call in calls:
        with pytest.raises(nats_sync.LimitExceededError) as refused:
            call()
        assert refused.value.argument == "key"
        assert refused.value.length == kv.max_key_length + 1


def test_the_limit_counts_utf8_bytes(kv):
    """A read key's limit is in bytes: a two-byte character counts twice."""
    with pytest.raises(nats_sync.LimitExceededError):
        kv.get("é" * (kv.max_key_length // 2 + 1))
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("é" * (kv.max_key_length // 2))


# -- many filters ---------------------------------------------------------------------


def test_each_filter_has_the_whole_timeout_to_find_its_last_message(js, kv):
    """keys() and watch() of many filters ask the stream leader once per filter, each
    request with the call's timeout: a first answer that took all of it leaves the others
    theirs (one deadline shared by every request timed out a keys() of 3,000 filters on a
    busy machine)."""
    revisions = [kv.put(key, b"v") for key in ("a", "b", "c")]
    stream = js.stream_no_info(f"KV_{kv.bucket}")
    given: list[float] = []
    began = time.monotonic()

    class SlowFirstAnswer:
        """The bucket's stream, whose first answer comes when the whole timeout has passed."""

        def get_last_msg_for_subject(self, subject: str, timeout: float) -> object:
            given.append(timeout)
            msg = stream.get_last_msg_for_subject(subject, timeout=timeout)
            if len(given) == 1:
                wait_for(lambda: time.monotonic() > began + 0.5, timeout=5)
            return msg

    filters = [f"$KV.{kv.bucket}.{key}" for key in ("a", "b", "c")]
    assert initial_end(SlowFirstAnswer(), filters, 0.5) == revisions[-1]  # type: ignore[arg-type]
    assert given == [0.5, 0.5, 0.5]


def test_keys_of_thousands_of_filters_wait_the_calls_timeout_for_their_consumer(nc, kv):
    """keys(filters, timeout=) gives the server the call's timeout to create its consumer,
    not the context's: nats-server takes time quadratic in the filters to do it (about
    1.5 s for 5,000, 7 s for 10,000), and a keys(timeout=60) of 10,000 keys timed out
    at the context's 5 s."""
    bucket = nc.jetstream(timeout=0.2).key_value(kv.bucket)  # shorter than the creation
    kv.put("k1", b"v")
    kv.put("k4999", b"v")
    filters = [f"k{i}" for i in range(5000)]
    assert sorted(bucket.keys(filters, timeout=30)) == ["k1", "k4999"]


def test_filters_one_of_which_covers_another_list_their_union(kv):
    """Filters where one covers another (a duplicate, a.b under a.*, a.* under a.>) list
    the keys any of them matches, once each: nats-server refuses a consumer with a filter
    that another one covers (10138), and a duplicate was refused by the consumer config.
    Filters that only share some keys (a.* and *.b) the server takes as they are."""
    for key in ("a.b", "a.c", "a.b.c", "x", "z.b"):
        kv.put(key, b"v")
    assert kv.keys(["a.b", "a.b"]) == ["a.b"]
    assert kv.keys(["a.*", "a.>"]) == ["a.b", "a.c", "a.b.c"]
    assert kv.keys(["a.b", "x", "a.*"]) == ["a.b", "a.c", "x"]
    assert kv.keys(["x", ">"]) == ["a.b", "a.c", "a.b.c", "x", "z.b"]
    assert kv.keys(["a.*", "*.b"]) == ["a.b", "a.c", "z.b"]
    assert kv.keys(["a.*", "*.b", "*.*"]) == ["a.b", "a.c", "z.b"]
    with kv.watch(["a.b", "a.>"]) as watcher:
        assert [e.key for e in watcher.initial()] == ["a.b", "a.c", "a.b.c"]
        rev = kv.put("a.b", b"w")
        assert watcher.next(timeout=5).revision == rev
        kv.put("x", b"w")
        last = kv.put("a.z", b"w")
        assert watcher.next(timeout=5).revision == last


def test_a_filter_given_as_bytes_is_refused_naming_it(kv):
    """A bytes filter raises InvalidKeyError quoting it, not one of its bytes as an int."""
    with pytest.raises(nats_sync.InvalidKeyError, match="b'a.b'"):
        kv.keys(b"a.b")  # type: ignore[arg-type]


# -- keys other clients stored ----------------------------------------------------------


def _raw_publish(server: NatsServer, frames: bytes) -> None:
    """Publish with a bare socket (bytes no client library would send), then PING/PONG."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.recv(4096)  # INFO
        sock.sendall(b'CONNECT {"verbose":false}\r\n' + frames + b"PING\r\n")
        got = b""
        while b"PONG\r\n" not in got:
            chunk = sock.recv(4096)
            assert chunk, f"the server closed the connection: {got!r}"
            got += chunk
        assert b"-ERR" not in got, got


def test_foreign_keys_are_readable_and_deletable(shared_server, js, kv):
    """Keys stored by nats-py (a@b, x#y) and as raw non-UTF-8 bytes (caf\\xe9) that keys()
    lists are read by get() and history(), removed by delete() and purge(), and watched;
    this client still writes only ADR-8 keys."""
    prefix = f"$KV.{kv.bucket}."

    async def natspy_writes() -> None:
        anc = await nats.connect(shared_server.url)
        await anc.jetstream().publish(prefix + "a@b", b"from nats-py")
        await anc.jetstream().publish(prefix + "x#y", b"hash")
        await anc.close()

    asyncio.run(natspy_writes())
    _raw_publish(shared_server, b"PUB " + prefix.encode() + b"caf\xe9 3\r\nraw\r\n")
    # PONG says the server read the PUB, not that the stream stored it yet
    stream = js.stream(f"KV_{kv.bucket}")
    wait_for(lambda: stream.info().state.messages == 3, message="the raw key was not stored")
    cafe = "caf\udce9"  # the byte 0xE9, as the client keeps non-UTF-8 subjects
    assert kv.keys() == ["a@b", "x#y", cafe]
    assert kv.get("a@b").value == b"from nats-py"
    assert kv.get(cafe).value == b"raw"
    assert [e.value for e in kv.history("x#y")] == [b"hash"]
    with kv.watch("a@b") as w:
        assert w.next(timeout=5).key == "a@b"
    kv.delete("a@b")
    kv.purge(cafe)
    with pytest.raises(nats_sync.KeyDeletedError):
        kv.get(cafe)
    assert kv.keys() == ["x#y"]
    for key in ("a@b", cafe):
        with pytest.raises(nats_sync.InvalidKeyError):
            kv.put(key, b"x")
    for key in ("", "a b", "a\tb", "a..b", ".a", "a.", "a.*", ">"):  # no client's key
        for call in (kv.get, kv.delete, kv.purge, kv.history):
            with pytest.raises(nats_sync.InvalidKeyError):
                call(key)


def test_keys_with_a_wildcard_character_inside_a_token_are_read_like_any_other(
    shared_server, js, kv
):
    """A token holding * or > beside other characters (a*b, c>d) is literal to the server:
    nats-py stores such keys, and what keys() lists get(), history(), a watch, delete()
    and purge() take; only a whole-token * or > is a wildcard."""
    prefix = f"$KV.{kv.bucket}."

    async def natspy_writes() -> None:
        anc = await nats.connect(shared_server.url)
        for key in ("a*b", "c>d", "e.f*", "g>"):
            await anc.jetstream().publish(prefix + key, key.encode())
        await anc.close()

    asyncio.run(natspy_writes())
    assert kv.keys() == ["a*b", "c>d", "e.f*", "g>"]
    assert kv.keys(["a*b", "e.*"]) == ["a*b", "e.f*"]
    for key in ("a*b", "c>d", "e.f*", "g>"):
        assert kv.get(key).value == key.encode()
        assert [e.value for e in kv.history(key)] == [key.encode()]
    with kv.watch("c>d") as w:
        assert [e.key for e in w.initial()] == ["c>d"]
    kv.delete("a*b")
    kv.purge("g>")
    assert kv.keys() == ["c>d", "e.f*"]
    with pytest.raises(nats_sync.KeyDeletedError):
        kv.get("g>")
    with pytest.raises(nats_sync.InvalidKeyError):
        kv.put("a*b", b"x")  # this client writes ADR-8 keys only


def test_non_utf8_key_is_refused_by_consumer_reads_and_left_by_purge_deletes(shared_server, js, kv):
    """history() and watch() of a non-UTF-8 key raise InvalidKeyError (the server reads a
    consumer's filter as UTF-8); purge_deletes() leaves its marker and history alone."""
    prefix = f"$KV.{kv.bucket}."
    _raw_publish(shared_server, b"PUB " + prefix.encode() + b"caf\xe9 3\r\nraw\r\n")
    stream = js.stream(f"KV_{kv.bucket}")
    wait_for(lambda: stream.info().state.messages == 1, message="the raw key was not stored")
    cafe = "caf\udce9"
    for call in (kv.history, kv.watch, kv.keys, lambda k: kv.watch(["x", k])):
        with pytest.raises(nats_sync.InvalidKeyError, match="not UTF-8"):
            call(cafe)
    kv.put("plain", b"1")
    kv.delete("plain")
    marker = kv.delete(cafe)
    assert kv.purge_deletes(older_than=-1) == 1
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("plain")
    assert kv.get(cafe, revision=1).value == b"raw"
    with pytest.raises(nats_sync.KeyDeletedError) as deleted:
        kv.get(cafe)
    assert deleted.value.entry.revision == marker


def test_non_utf8_key_on_a_bucket_without_direct_get_is_refused_not_missing(shared_server, js):
    """Without direct get a read names the key in the API's JSON request, which the server
    reads as UTF-8: a non-UTF-8 key raises InvalidKeyError instead of a KeyNotFoundError
    that says a stored key is not there."""
    bucket = unique_stream_name("nd")
    js.create_key_value(bucket=bucket)
    stream = js.stream(f"KV_{bucket}")
    js.update_stream(attrs.evolve(stream.info().config, allow_direct=False))
    kv = js.key_value(bucket)
    try:
        _raw_publish(shared_server, f"PUB $KV.{bucket}.".encode() + b"caf\xe9 3\r\nraw\r\n")
        wait_for(lambda: stream.info().state.messages == 1, message="the raw key was not stored")
        assert kv.keys() == ["caf\udce9"]
        for revision in (None, 1):
            with pytest.raises(nats_sync.InvalidKeyError, match="not UTF-8"):
                kv.get("caf\udce9", revision=revision)
    finally:
        js.delete_key_value(bucket)
