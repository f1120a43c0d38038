"""The ``jetstream-kv`` data source: write key/value rows into a bucket, read its values back."""

from __future__ import annotations

import uuid

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def bucket(js):
    """A fresh bucket, deleted afterwards."""
    name = "spark" + uuid.uuid4().hex[:8]
    kv = js.create_key_value(bucket=name)
    yield kv
    js.delete_key_value(name)


def test_write_then_read_a_bucket(spark, shared_server, bucket):
    """Rows are put (a null value deletes the key); the read returns each key's current value."""
    bucket.put("gone", b"soon")
    binary = spark.createDataFrame(
        [("eu", b"10"), ("us", b"20"), ("apac", b"30")], "key STRING, value BINARY"
    )
    strings = spark.createDataFrame([("eu", "11"), ("gone", None)], "key STRING, value STRING")
    for df in (binary, strings):
        (
            df.coalesce(1)
            .write.format("jetstream-kv")
            .mode("append")
            .option("servers", shared_server.url)
            .option("bucket", bucket.bucket)
            .save()
        )
    got = (
        spark.read.format("jetstream-kv")
        .option("servers", shared_server.url)
        .option("bucket", bucket.bucket)
        .load()
        .collect()
    )
    values = {r.key: (bytes(r.value), r.operation, r.bucket) for r in got}
    assert values == {
        "eu": (b"11", "PUT", bucket.bucket),
        "us": (b"20", "PUT", bucket.bucket),
        "apac": (b"30", "PUT", bucket.bucket),
    }
    assert {r.key: r.revision for r in got} == {
        e.key: e.revision for e in (bucket.get(k) for k in ("eu", "us", "apac"))
    }


@pytest.mark.parametrize("key", ["bad key", None])
def test_a_row_the_bucket_refuses_is_named_in_the_error(spark, shared_server, bucket, key):
    """A key the bucket cannot take fails the task with the row, its partition and its key."""
    df = spark.createDataFrame([("a", "1"), ("b", "2"), (key, "3")], "key STRING, value STRING")
    write = (
        df.coalesce(1)
        .write.format("jetstream-kv")
        .mode("append")
        .option("servers", shared_server.url)
        .option("bucket", bucket.bucket)
    )
    with pytest.raises(Exception, match="InvalidKeyError") as failed:
        write.save()
    assert f"writing row 3 of partition 0 (key {key!r}) to bucket {bucket.bucket!r}" in str(
        failed.value
    )
    assert [bucket.get(k).value for k in ("a", "b")] == [b"1", b"2"]


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("keys", "orders..eu", "BadSubjectError: option 'keys'"),
        ("keys", ">.eu", "BadSubjectError: option 'keys'"),
        ("bucket", "nosuchbucket", "BucketNotFoundError"),
    ],
)
def test_a_bad_batch_read_fails_at_planning_not_in_a_task(
    spark, shared_server, bucket, option, value, error
):
    """A bad key filter or a missing bucket fails the read on the driver, as the change feed does,
    not once per task attempt."""
    from pyspark.errors import AnalysisException

    options = {"bucket": bucket.bucket, option: value}
    reader = spark.read.format("jetstream-kv").option("servers", shared_server.url)
    for key, text in options.items():
        reader = reader.option(key, text)
    with pytest.raises(AnalysisException, match=error):
        reader.load().collect()
