"""The Spark tests' sessions (``tests/fixtures/spark.py``): ``spark``, one classic session
for the whole run, and ``connect_spark``, a Spark Connect server and a remote session per
module; and ``standalone_spark`` (``tests/fixtures/spark_cluster.py``), a standalone master,
two workers and a driver application whose executors run this package from a packed venv."""

from __future__ import annotations

from tests.fixtures.spark import connect_spark, spark
from tests.fixtures.spark_cluster import packed_environment, standalone_spark

__all__ = ["connect_spark", "packed_environment", "spark", "standalone_spark"]
