"""``python -m benchmarks scaling`` measures every point of every curve and draws each curve.

Figures are never asserted, only that each point was measured and each PNG written
(when matplotlib is installed; without it the run must still succeed and say so).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def _run(out: Path, names: list[str], scale: str, timeout: float) -> dict[str, Any]:
    """Run the scaling benchmark's curves ``names`` into ``out``; return each curve's JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scaling", "--out", str(out), "--scale", scale,
         "--only", ",".join(names)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    for name in names:  # the table of each curve is printed
        assert f"**{name}**" in done.stdout, done.stdout[-3000:]
    return {name: json.loads((out / f"{name}.json").read_text()) for name in names}


def _check_points(docs: dict[str, Any], out: Path) -> None:
    """Every (mode, x, client) of each curve has a measured rate; each curve has its PNG."""
    from benchmarks.scaling import CURVES

    for name, doc in docs.items():
        curve = CURVES[name]
        points = {(p["mode"], p["x"], p["client"]): p for p in doc["summary"]}
        wanted = {(m, x, c) for m in curve.modes for x in curve.xs for c in curve.clients}
        assert set(points) == wanted, name
        for key, point in points.items():
            assert "error" not in point, (name, key, point)
            assert point["msgs_per_s"] > 0, (name, key, point)
        png = out / f"{name}.png"
        if HAVE_MATPLOTLIB:
            assert png.read_bytes()[:8] == PNG_MAGIC, name
            assert doc["png"] == png.name
            assert doc["meta"]["plots"] == "drawn", doc["meta"]
        else:
            assert not png.exists()
            assert doc["meta"]["plots"].startswith("skipped"), doc["meta"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_scaling_run_measures_every_point_and_draws_each_curve(tmp_path: Path) -> None:
    """The four client curves at a tiny scale: each point measured, each PNG a PNG."""
    docs = _run(tmp_path, ["threads", "subs", "payload", "batch"], "0.001", timeout=560)
    _check_points(docs, tmp_path)
    from benchmarks.scaling import CURVES

    subs = {(p["client"], p["x"]): p for p in docs["subs"]["summary"]}
    for x in CURVES["subs"].xs:  # memory per subscription is measured, not only rates
        assert subs[("ours", x)]["traced_bytes_per_sub"] > 0, subs[("ours", x)]
    assert all(p["p99_us"] >= p["p50_us"] > 0 for p in docs["threads"]["summary"])


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_tiny_spark_curve_reads_with_each_partition_count(tmp_path: Path) -> None:
    """The Spark curve on 5,000 messages: a checked count() per partition count, and its PNG."""
    pytest.importorskip("pyspark")
    docs = _run(tmp_path, ["spark"], "0.0005", timeout=850)
    _check_points(docs, tmp_path)
    assert {p["n"] for p in docs["spark"]["summary"]} == {5000}


def test_without_matplotlib_the_plots_are_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No matplotlib: ``draw`` writes nothing, returns no paths and says why in the meta."""
    from benchmarks import scaling

    monkeypatch.delitem(sys.modules, "benchmarks.scaling_plot", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    curve = scaling.CURVES["batch"]
    summary = [{"curve": "batch", "client": "ours", "x": 1, "mode": "", "msgs_per_s": 1.0}]
    meta: dict[str, Any] = {}
    assert scaling.draw([curve], {"batch": summary}, tmp_path, meta) == {}
    assert meta["plots"].startswith("skipped"), meta
    assert list(tmp_path.iterdir()) == []


def test_tick_labels_keep_the_fractions_of_small_values() -> None:
    """A linear axis ticked at 0.5 steps reads 1.5, 2, 2.5, not 2, 2, 2 (rounded)."""
    pytest.importorskip("matplotlib")
    from benchmarks.scaling_plot import _count

    assert [_count(x) for x in (0, 0.5, 1.5, 2, 3.5, 12.5, 12500)] == [
        "0", "0.5", "1.5", "2", "3.5", "12", "12,500",
    ]  # fmt: skip
