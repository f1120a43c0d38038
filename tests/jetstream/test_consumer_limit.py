"""Limits a server or account sets: streams per account, consumers per stream, pull sizes."""

from __future__ import annotations

import pytest

import jetstream_sync
from tests.fixtures.server import NatsServer

SERVER_DEFAULT = 1_000  # nats-server 2.15: jetstream { limits { default_max_consumers } }


def test_a_stream_holds_1000_consumers_unless_it_asks_for_more(nats_server: NatsServer) -> None:
    """On a server without its own limit, a stream takes 1,000 consumers (its
    ``max_consumers=-1`` does not lift that); the next one raises
    MaximumConsumersLimitError naming the stream. A positive ``max_consumers`` above the
    default takes more."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(name="MANY", subjects=["many.>"], max_consumers=-1)
        for _ in range(SERVER_DEFAULT):
            stream.create_consumer(inactive_threshold=60.0)
        with pytest.raises(jetstream_sync.MaximumConsumersLimitError) as refused:
            stream.create_consumer(inactive_threshold=60.0)
        assert (refused.value.err_code, refused.value.stream) == (10026, "MANY")
        js.update_stream(stream.info().config, max_consumers=SERVER_DEFAULT + 1)
        stream.create_consumer(inactive_threshold=60.0)
        assert stream.info().state.consumer_count == SERVER_DEFAULT + 1


def test_an_account_at_its_max_streams_raises_a_typed_error(tmp_path) -> None:
    """An account at its ``max_streams`` refuses one more stream, Key-Value bucket or
    Object Store bucket with MaximumStreamsLimitError (10027), and creates nothing."""
    config = "accounts { A { jetstream { max_streams: 1 }, users [ {user: a, password: a} ] } }"
    server = NatsServer(directory=tmp_path / "nats-server", extra_config=config).start()
    try:
        with jetstream_sync.connect(server.url, user="a", password="a") as nc:
            js = nc.jetstream()
            js.create_stream(name="ONLY", subjects=["only"])
            for create in (
                lambda: js.create_stream(name="MORE", subjects=["more"]),
                lambda: js.create_key_value(bucket="more"),
                lambda: js.create_object_store(bucket="more"),
            ):
                with pytest.raises(jetstream_sync.MaximumStreamsLimitError) as refused:
                    create()
                assert refused.value.err_code == 10027
            assert list(js.stream_names()) == ["ONLY"]
    finally:
        server.stop()


def test_ordered_reads_keep_within_the_servers_max_request_batch(tmp_path) -> None:
    """On a server whose ``jetstream { limits { max_request_batch } }`` is below what
    the library pulls at once, ordered consumers, Key-Value reads and Object Store
    reads still deliver (the server refused every pull and they timed out)."""
    limits = ["limits { max_request_batch: 10 }"]
    server = NatsServer(directory=tmp_path / "nats-server", jetstream_config=limits).start()
    try:
        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            stream = js.create_stream(name="S", subjects=["s"])
            for i in range(30):
                js.publish("s", b"%d" % i)
            with stream.ordered_consumer() as oc, oc.messages() as it:
                assert [int(it.next(timeout=5).data) for _ in range(30)] == list(range(30))
            with stream.ordered_consumer() as oc:  # "up to batch": at most the server's 10
                assert [int(m.data) for m in oc.fetch(30, timeout=5)] == list(range(10))
                assert [int(m.data) for m in oc.fetch_no_wait(30)] == list(range(10, 20))
            kv = js.create_key_value(bucket="kv")
            for i in range(30):
                kv.put(f"k{i}", b"v")
            assert sorted(kv.keys(timeout=5)) == sorted(f"k{i}" for i in range(30))
            obs = js.create_object_store(bucket="obs")
            obs.put("o", b"x" * 300, chunk_size=10)
            assert obs.get("o", timeout=5) == b"x" * 300
    finally:
        server.stop()


def test_an_arrow_read_by_consumer_keeps_within_the_servers_max_request_batch(tmp_path) -> None:
    """read_arrow() of a stream without direct get (the Spark sources' read) asks its
    consumer for at most the server's ``max_request_batch`` at a time and reads every
    message (its 4,096 at once were refused: PullRequestLimitError)."""
    limits = ["limits { max_request_batch: 10 }"]
    server = NatsServer(directory=tmp_path / "nats-server", jetstream_config=limits).start()
    try:
        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            stream = js.create_stream(name="S", subjects=["s"], allow_direct=False)
            for i in range(35):
                js.publish_async("s", b"%d" % i)
            js.publish_async_completed(10)
            for batch in (None, 25):
                read = stream.read_arrow(batch=batch, timeout=5)
                seqs = [seq for rows in read for seq in rows.column("seq").to_pylist()]
                assert seqs == list(range(1, 36))
    finally:
        server.stop()
