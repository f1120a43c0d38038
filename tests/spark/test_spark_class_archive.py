"""The JVMs of the ``spark`` tests start with this venv's archive of Spark's classes."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.polling import wait_for
from tests.fixtures.spark_classes import (
    JVM_OPTIONS,
    MAKE_TIMEOUT,
    archive_path,
    java_options,
    use_archive,
)

pytestmark = pytest.mark.spark


@pytest.mark.timeout(MAKE_TIMEOUT + 60)
def test_the_archive_is_made_and_then_named_in_java_tool_options():
    """The archive gets made (a ``spark`` test before this one started it), and once it is,
    the next ``spark`` test's JVMs get it through ``JAVA_TOOL_OPTIONS`` (unless the options
    are the user's own)."""
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if not options.startswith(JVM_OPTIONS):
        pytest.skip(f"JAVA_TOOL_OPTIONS is the user's own: {options!r}")
    path = archive_path()
    if path is None:
        pytest.skip("no Java or no pyspark here")
    wait_for(path.is_file, timeout=MAKE_TIMEOUT, message="the archive was not made")
    assert path.stat().st_size > 0
    use_archive()  # what runs before the next spark test
    assert os.environ["JAVA_TOOL_OPTIONS"] == java_options(path)
