"""The Spark processes of the tests run from this venv's Spark home, whose Python workers
import the installed pyspark, not the zip of its sources (``tests/fixtures/spark_home.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.spark_home import pyspark_directory, spark_home

pytestmark = pytest.mark.spark


def _home() -> Path:
    home = spark_home()
    if home is None or os.environ.get("SPARK_HOME") != str(home):
        pytest.skip(f"SPARK_HOME is not the tests' own: {os.environ.get('SPARK_HOME')!r}")
    return home


def test_the_home_has_pysparks_scripts_and_jars_but_not_its_zips():
    """Every entry Spark reads is pyspark's own, but ``python/lib``."""
    home, pyspark = _home(), pyspark_directory()
    assert pyspark is not None
    for name in ("bin", "sbin", "jars"):
        assert (home / name).resolve() == (pyspark / name).resolve()
    assert (pyspark / "python" / "lib" / "pyspark.zip").is_file()
    assert not (home / "python" / "lib").exists()


def test_executors_python_workers_import_the_installed_pyspark(spark: Any):
    """A task's worker finds pyspark in site-packages (a zip's path has ``.zip/`` in it)."""
    home, pyspark = _home(), pyspark_directory()
    assert home is not None and pyspark is not None

    def pyspark_file(_: Any) -> list[str]:  # a nested function: pickled by value
        import pyspark

        return [pyspark.__file__ or ""]

    files = spark.sparkContext.parallelize(range(2), 2).mapPartitions(pyspark_file).collect()
    assert files and all(Path(f).parent == pyspark for f in files), files
