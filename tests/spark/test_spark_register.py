"""``jetstream_sync.spark`` before any Spark: a quiet import and a clear missing-package error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import jetstream_sync.spark as jss
from tests.fixtures.spark import REPO_ROOT

pytestmark = pytest.mark.spark


def test_importing_loads_no_spark_connects_nothing_starts_no_thread():
    """Importing the package imports neither pyspark nor pyarrow and starts no thread."""
    code = (
        "import sys, threading\n"
        "import jetstream_sync.spark\n"
        "assert 'pyspark' not in sys.modules and 'pyarrow' not in sys.modules\n"
        "assert threading.active_count() == 1\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_register_without_pyarrow_names_the_missing_package(monkeypatch):
    """Without pyarrow, register() fails at once with a message naming it."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    with pytest.raises(ImportError, match="'pyarrow'"):
        jss.register(object())
