"""The Spark tests: ``spark`` is one session for the whole run (``tests/fixtures/spark.py``)."""

from __future__ import annotations

from tests.fixtures.spark import spark

__all__ = ["spark"]
