"""Object Store interop with nats-py: objects and links written by one are read by the other."""

from __future__ import annotations

import asyncio
import os

import nats
import pytest
from nats.js import api as napi

import jetstream_sync as jsync

pytestmark = pytest.mark.interop

CHUNK = 4096


def _natspy(url: str, work):
    """Run ``await work(jetstream_context)`` on a fresh nats-py connection."""

    async def main():
        nc = await nats.connect(url)
        try:
            return await work(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())


def test_object_put_by_natspy_is_read_here(nats_server):
    """A multi-chunk object nats-py stores reads back here with its digest checked."""
    data = os.urandom(5 * CHUNK + 123)

    async def put(ajs):
        obs = await ajs.create_object_store("PYBUCKET")
        meta = napi.ObjectMeta(
            name="from-py", description="py", options=napi.ObjectMetaOptions(max_chunk_size=CHUNK)
        )
        return await obs.put("from-py", data, meta=meta)

    py_info = _natspy(nats_server.url, put)
    with jsync.connect(nats_server.url) as nc:
        obs = nc.jetstream().object_store("PYBUCKET")
        info = obs.get_info("from-py")
        assert (info.size, info.chunks, info.digest) == (len(data), 6, py_info.digest)
        assert info.description == "py" and info.mtime is not None
        assert obs.get("from-py") == data
        assert [i.name for i in obs.list()] == ["from-py"]


def test_object_put_here_is_read_by_natspy(nats_server):
    """A multi-chunk object stored here reads back in nats-py, which checks the digest."""
    data = os.urandom(7 * CHUNK + 1)
    with jsync.connect(nats_server.url) as nc:
        obs = nc.jetstream().create_object_store(bucket="OURS")
        ours = obs.put("from-ours", data, headers={"h": "v"}, chunk_size=CHUNK)

    async def get(ajs):
        obs = await ajs.object_store("OURS")
        info = await obs.get_info("from-ours")
        return info, (await obs.get("from-ours")).data

    py_info, got = _natspy(nats_server.url, get)
    assert got == data
    assert (py_info.size, py_info.chunks, py_info.digest) == (len(data), 8, ours.digest)
    assert py_info.headers == {"h": ["v"]} and py_info.options.max_chunk_size == CHUNK


def test_links_cross_both_ways(nats_server):
    """A link made here is followed by nats-py; a link nats-py writes is followed here."""
    with jsync.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        target = ctx.create_object_store(bucket="TARGET").put("t", b"target bytes")
        links = ctx.create_object_store(bucket="LINKS")
        links.add_link("ours-link", target)

        async def natspy_side(ajs):
            obs = await ajs.object_store("LINKS")
            followed = (await obs.get("ours-link")).data
            # nats-py has no add_link: a link is a put whose meta options carry one.
            meta = napi.ObjectMeta(
                name="py-link",
                options=napi.ObjectMetaOptions(
                    link=napi.ObjectLink(bucket="TARGET", name="t"), max_chunk_size=CHUNK
                ),
            )
            await obs.put("py-link", b"", meta=meta)
            return followed

        assert _natspy(nats_server.url, natspy_side) == b"target bytes"
        info = links.get_info("py-link")
        assert info.is_link and info.link == jsync.ObjectLink(bucket="TARGET", name="t")
        assert links.get("py-link") == b"target bytes"
