"""One rule in every Spark reader for bytes another client wrote that are not UTF-8.

The fixture is a Key-Value bucket where a raw client put a key whose bytes are
not UTF-8 (``caf\\xe9``) next to a plain one. Each reader (the stream's batch
and streaming reads, the bucket's batch read with and without history, and
its change feed) shows the row, each invalid byte as U+FFFD (docs/spark.md).
"""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.polling import wait_for
from tests.fixtures.raw_client import RawClient
from tests.fixtures.spark import run_into_parquet

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SHOWN = "caf\ufffd"  # the key caf\xe9 as every reader shows it


@pytest.fixture
def foreign_bucket(js, shared_server):
    """A bucket holding ``plain`` and a key another client wrote as the bytes ``caf\\xe9``."""
    name = "foreign" + uuid.uuid4().hex[:8]
    kv = js.create_key_value(bucket=name, history=5)
    kv.put("plain", b"p")
    raw = RawClient(shared_server.port)
    try:
        raw.send(b"PUB $KV.%s.caf\xe9 1\r\nf\r\n" % name.encode())
    finally:
        raw.close()
    wait_for(lambda: js.stream(f"KV_{name}").info().state.messages == 2)
    yield kv
    js.delete_key_value(name)


def _batch(spark, server, fmt: str, **options):
    reader = spark.read.format(fmt).option("servers", server.url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().collect()


def _streamed(spark, server, fmt: str, tmp_path, **options):
    reader = spark.readStream.format(fmt).option("servers", server.url)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = run_into_parquet(reader.load(), tmp_path)
    assert query.exception() is None, query.exception()
    return spark.read.parquet(str(tmp_path / "out")).collect()


@pytest.mark.parametrize(
    "reader",
    ["stream-batch", "stream-streaming", "kv-batch", "kv-batch-history", "kv-feed"],
)
def test_every_reader_shows_a_key_that_is_not_utf8_with_u_fffd(
    spark, shared_server, foreign_bucket, tmp_path, reader
):
    """The row is read, never an error; the invalid byte reads as U+FFFD in every reader."""
    bucket = foreign_bucket.bucket
    prefix = f"$KV.{bucket}."
    if reader == "stream-batch":
        rows = _batch(spark, shared_server, "jetstream", stream=f"KV_{bucket}")
        got = {(r.subject.removeprefix(prefix), bytes(r.data)) for r in rows}
    elif reader == "stream-streaming":
        rows = _streamed(
            spark, shared_server, "jetstream", tmp_path,
            stream=f"KV_{bucket}", startingOffsets="earliest",
        )  # fmt: skip
        got = {(r.subject.removeprefix(prefix), bytes(r.data)) for r in rows}
    elif reader == "kv-feed":
        rows = _streamed(
            spark, shared_server, "jetstream-kv", tmp_path,
            bucket=bucket, startingOffsets="earliest",
        )  # fmt: skip
        got = {(r.key, bytes(r.value)) for r in rows}
    else:
        history = "true" if reader == "kv-batch-history" else "false"
        rows = _batch(spark, shared_server, "jetstream-kv", bucket=bucket, includeHistory=history)
        got = {(r.key, bytes(r.value)) for r in rows}
    assert got == {("plain", b"p"), (SHOWN, b"f")}
