"""The JVMs of the ``spark`` tests start with this venv's archive of Spark's classes."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.spark_classes import JVM_OPTIONS, archive_path, java_options

pytestmark = pytest.mark.spark


def test_a_spark_test_finds_the_archive_made_and_named_in_java_tool_options():
    """Before a ``spark`` test runs, the archive exists and ``JAVA_TOOL_OPTIONS`` names it
    (unless the options are the user's own)."""
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if not options.startswith(JVM_OPTIONS):
        pytest.skip(f"JAVA_TOOL_OPTIONS is the user's own: {options!r}")
    path = archive_path()
    if path is None:
        pytest.skip("no Java or no pyspark here")
    assert path.is_file() and path.stat().st_size > 0
    assert options == java_options(path)
