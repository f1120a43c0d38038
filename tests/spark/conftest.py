"""The Spark tests' sessions (``tests/fixtures/spark.py``): ``spark``, one classic session
for the whole run, and ``connect_spark``, a Spark Connect server and a remote session per
module."""

from __future__ import annotations

from tests.fixtures.spark import connect_spark, spark

__all__ = ["connect_spark", "spark"]
