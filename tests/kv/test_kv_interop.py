"""KV interop with nats-py: a bucket written by one client is read by the other, both ways."""

from __future__ import annotations

import asyncio

import nats
import nats.js.errors
import pytest

import jetstream_sync as nats_sync
from jetstream_sync import KeyValueOp
from tests.fixtures.jetstream import deletion_marker
from tests.fixtures.polling import wait_for

pytestmark = pytest.mark.interop


def test_bucket_written_by_natspy_is_read_here(nats_server):
    """Values, history, deletes, purges and a TTL'd key written by nats-py read the same here."""

    async def natspy_writes():
        anc = await nats.connect(nats_server.url)
        kv = await anc.jetstream().create_key_value(bucket="FROMPY", history=5, limit_marker_ttl=5)
        revs = {
            "a1": await kv.put("cfg.a", b"1"),
            "a2": await kv.put("cfg.a", b"2"),
            "b": await kv.put("cfg.b", b"x"),
            "c": await kv.create("cfg.c", b"c"),
            "t": await kv.create("ttl.k", b"short", msg_ttl=1),
        }
        await kv.delete("cfg.b")
        await kv.put("gone", b"1")
        await kv.purge("gone")
        await anc.close()
        return revs

    revs = asyncio.run(natspy_writes())
    with nats_sync.connect(nats_server.url) as nc:
        kv = nc.jetstream().key_value("FROMPY")
        assert kv.status().history == 5 and kv.status().limit_marker_ttl == 5.0
        entry = kv.get("cfg.a")
        assert (entry.value, entry.revision) == (b"2", revs["a2"])
        assert [e.value for e in kv.history("cfg.a")] == [b"1", b"2"]
        with pytest.raises(nats_sync.KeyDeletedError) as deleted:
            kv.get("cfg.b")
        assert deleted.value.entry.operation is KeyValueOp.DEL
        with pytest.raises(nats_sync.KeyDeletedError) as purged:
            kv.get("gone")
        assert purged.value.entry.operation is KeyValueOp.PURGE
        assert kv.history("gone")[0].operation is KeyValueOp.PURGE
        assert sorted(kv.keys("cfg.>")) == ["cfg.a", "cfg.c"]
        with kv.watch("cfg.*") as w:
            initial = []
            while (e := w.next(timeout=5)) is not None:
                initial.append((e.key, e.operation))
        assert initial == [("cfg.a", KeyValueOp.PUT), ("cfg.c", KeyValueOp.PUT),
                           ("cfg.b", KeyValueOp.DEL)]  # fmt: skip

        marker = wait_for(lambda: deletion_marker(kv, "ttl.k"), timeout=10, interval=0.1)
        assert marker.operation is KeyValueOp.PURGE and marker.revision > revs["t"]


def test_bucket_written_here_is_read_by_natspy(nats_server):
    """Values, history, deletes and a watch: nats-py reads what this client wrote."""
    with nats_sync.connect(nats_server.url) as nc:
        kv = nc.jetstream().create_key_value(bucket="FROMUS", history=4)
        r1 = kv.put("k", b"one")
        r2 = kv.put("k", b"two")
        kv.put("del", b"x")
        kv.delete("del")
        kv.put("p", b"x")
        kv.purge("p")
        kv.create("new", b"n")

        async def natspy_reads():
            anc = await nats.connect(nats_server.url)
            akv = await anc.jetstream().key_value("FROMUS")
            latest = await akv.get("k")
            old = await akv.get("k", revision=r1)
            history = [e.value for e in await akv.history("k")]
            missing = []
            for key in ("del", "p"):
                try:
                    await akv.get(key)
                except nats.js.errors.KeyNotFoundError:
                    missing.append(key)
            keys = sorted(await akv.keys())
            watcher = await akv.watchall()
            # nats-py sends its "initial values done" None early when the server delivered
            # them all before its consumer info returned and its callback ran (nats/js/kv.py:
            # num_pending 0 and nothing received yet), so entries are collected past a None
            seen = []
            while len(seen) < 4:
                if (entry := await watcher.updates(timeout=5)) is not None:
                    seen.append((entry.key, entry.operation))
            kv.put("k", b"three")  # a write from here, seen by nats-py's watcher
            while (update := await watcher.updates(timeout=5)) is None:
                pass  # the None that came after the initial values, unless it came first
            await watcher.stop()
            await anc.close()
            return latest, old, history, missing, keys, seen, update

        latest, old, history, missing, keys, seen, update = asyncio.run(natspy_reads())
    assert (latest.value, latest.revision, old.value) == (b"two", r2, b"one")
    assert history == [b"one", b"two"]
    assert missing == ["del", "p"]
    assert keys == ["k", "new"]
    assert seen == [("k", None), ("del", "DEL"), ("p", "PURGE"), ("new", None)]
    assert (update.key, update.value) == ("k", b"three")
