"""The Spark benchmark family runs end to end; its figures are printed, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_split_covers_the_range_once():
    """The nats-py baseline's partition ranges cover first..last exactly once."""
    from benchmarks.spark_natspy import split

    for first, last, parts in ((1, 10, 3), (5, 5, 4), (1, 1_000_000, 2), (7, 100, 1)):
        ranges = split(first, last, parts)
        seqs = [seq for lo, hi in ranges for seq in range(lo, hi + 1)]
        assert seqs == list(range(first, last + 1)), (first, last, parts)
        assert len(ranges) == min(parts, last - first + 1)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_small_spark_benchmark_reports_both_ways(tmp_path: Path):
    """`python -m benchmarks spark --n 3000` exits 0 with a checked row per scenario and client.

    The main job's batch step and its read -> count are ours only.
    """
    pytest.importorskip("pyspark")
    out = tmp_path / "spark.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "spark", "--n", "3000", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=850,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| scenario | client |" in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert {(r["scenario"], r["client"]) for r in rows} == {
        (s, c) for s in ("read-count", "read-agg", "write") for c in ("ours", "nats-py")
    } | {("batch-step", "ours"), ("batch-step read-count", "ours")}
    assert all(isinstance(r["msgs_per_s"], int) for r in rows)
