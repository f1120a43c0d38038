"""Interop with the official asyncio client nats-py: what one writes, the other reads."""

from __future__ import annotations

import asyncio

import nats
import pytest

import jetstream_sync as js

pytestmark = pytest.mark.interop


def _run(coro):
    return asyncio.run(coro)


def test_core_messages_both_ways(nats_server):
    """Core messages with headers cross between nats-py and jetstream_sync in both directions."""
    with js.connect(nats_server.url) as nc:
        sub = nc.subscribe("interop.to.ours")
        nc.flush()  # the server has the SUB before nats-py publishes on its own connection

        async def natspy_side():
            anc = await nats.connect(nats_server.url)
            asub = await anc.subscribe("interop.to.py")
            await anc.flush()
            await anc.publish("interop.to.ours", b"from py", headers={"K": "v1"})
            await anc.flush()
            nc.publish("interop.to.py", b"from ours", headers={"K": "v2"})
            nc.flush()
            msg = await asub.next_msg(timeout=5)
            await anc.close()
            return msg

        got_py = _run(natspy_side())
        assert (got_py.data, got_py.headers["K"]) == (b"from ours", "v2")
        msg = sub.next_msg(timeout=5)
        assert (msg.data, msg.headers["K"]) == (b"from py", "v1")


def test_request_reply_across_clients(nats_server):
    """A nats-py responder answers our requests, and ours answers nats-py's."""
    with js.connect(nats_server.url) as nc:
        nc.subscribe("interop.ours.svc", cb=lambda m: m.respond(b"ours:" + m.data))
        nc.flush()

        async def natspy_side():
            anc = await nats.connect(nats_server.url)
            reply = await anc.request("interop.ours.svc", b"q", timeout=5)
            await anc.close()
            return reply.data

        assert _run(natspy_side()) == b"ours:q"


def test_jetstream_publish_and_read_both_ways(nats_server):
    """Messages stored by nats-py are read by us, and ours by nats-py, with headers and ids."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="INTEROP", subjects=["interop.js.>"])
        ours = ctx.publish("interop.js.ours", b"stored by ours", msg_id="ours-1")

        async def natspy_side():
            anc = await nats.connect(nats_server.url)
            ajs = anc.jetstream()
            ack = await ajs.publish(
                "interop.js.py", b"stored by py", headers={"Nats-Msg-Id": "py-1", "X": "y"}
            )
            dup = await ajs.publish("interop.js.ours", b"again", headers={"Nats-Msg-Id": "ours-1"})
            read = await ajs.get_msg("INTEROP", ours.seq)
            await anc.close()
            return ack, dup, read

        ack, dup, read = _run(natspy_side())
        assert dup.duplicate and dup.seq == ours.seq
        assert read.data == b"stored by ours"
        stored = stream.get_msg(ack.seq)
        assert (stored.data, stored.headers["X"]) == (b"stored by py", "y")


def test_rows_of_publish_arrow_are_what_nats_py_reads_and_dedupes(nats_server):
    """A table published with publish_arrow is read by a nats-py pull consumer with its
    headers, and nats-py publishing a row again under its Nats-Msg-Id is a duplicate."""
    pa = pytest.importorskip("pyarrow")
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="INTEROPARROW", subjects=["interop.arrow.>"])
        headers = pa.array([[("K", "v0")], [("K", "v1")]], pa.map_(pa.string(), pa.string()))
        table = pa.table({"data": [b"r0", b"r1"], "headers": headers, "msgId": ["m0", "m1"]})
        assert ctx.publish_arrow(table, "interop.arrow.t").rows == 2

        async def natspy_side():
            anc = await nats.connect(nats_server.url)
            ajs = anc.jetstream()
            psub = await ajs.pull_subscribe("interop.arrow.t", durable="arrow")
            msgs = await psub.fetch(2, timeout=5)
            dup = await ajs.publish("interop.arrow.t", b"r1", headers={"Nats-Msg-Id": "m1"})
            await anc.close()
            return [(m.data, m.headers["K"], m.headers["Nats-Msg-Id"]) for m in msgs], dup

        read, dup = _run(natspy_side())
        assert read == [(b"r0", "v0", "m0"), (b"r1", "v1", "m1")]
        assert dup.duplicate and dup.seq == 2
