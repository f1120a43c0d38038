"""The pipeline's JetStream datasets: orders per region, and the customers bucket's changes.

``spark-pipelines`` imports this file while its Spark Connect session is
the active one; the ``jetstream`` data sources are registered on it here,
before any dataset reads them. ``NATS_URL`` names the server (default: loopback).
"""

import os

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import jetstream_sync.spark as jss

spark = SparkSession.active()

URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

jss.register(spark)


@dp.materialized_view(comment="Revenue per region: every order of the ORDERS stream, summed.")
def revenue_by_region() -> DataFrame:
    """A batch read of the whole stream, recomputed by each run."""
    orders = spark.read.format("jetstream").option("servers", URL).option("stream", "ORDERS").load()
    return orders.groupBy(F.split("subject", r"\.")[1].alias("region")).agg(
        F.count("*").alias("orders"),
        F.sum(F.col("data").cast("string").cast("long")).alias("revenue"),
    )


@dp.table(comment="Every change of the customers bucket, appended once each (the change feed).")
def customer_changes() -> DataFrame:
    """The bucket's change feed; the pipeline's checkpoint says where the next run resumes."""
    return (
        spark.readStream.format("jetstream-kv")
        .option("servers", URL)
        .option("bucket", "customers")
        .option("startingOffsets", "earliest")
        .load()
    )
