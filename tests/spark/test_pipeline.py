"""examples/pipeline.py, the README's main job: JetStream -> Spark -> RESULTS and KV."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.fixtures.examples import EXAMPLES, run_example


def _pipeline_module() -> ModuleType:
    """examples/pipeline.py imported as a module (it is a script, not a package member)."""
    spec = importlib.util.spec_from_file_location("pipeline_example", EXAMPLES / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _outcome(pipeline: ModuleType, **changes: object):
    """An Outcome whose every check holds, with ``changes`` applied."""
    first = pipeline.Published(count=3, cents=Counter({"eu-west": 300, "us-east": 150}))
    second = pipeline.Published(count=1, cents=Counter({"eu-west": 25}))
    rows = [
        SimpleNamespace(region="eu-west", orders=2, revenue=Decimal("3.00")),
        SimpleNamespace(region="us-east", orders=1, revenue=Decimal("1.50")),
    ]
    totals = pipeline.RunningTotals(
        runs=[3, 1], revenue={"eu-west": Decimal("3.25"), "us-east": Decimal("1.50")}
    )
    outcome = pipeline.Outcome(
        first, second, rows, totals, results=2, hour_keys=2,
        kv_totals={"eu-west": "3.25", "us-east": "1.50"},
    )  # fmt: skip
    for name, value in changes.items():
        setattr(outcome, name, value)
    return outcome


def test_self_checks_hold_for_consistent_totals_and_catch_each_mismatch():
    """Every check holds on consistent numbers; a wrong total, count or KV value fails one."""
    pipeline = _pipeline_module()
    assert all(holds for _, holds in _outcome(pipeline).checks())
    broken = {
        "results": 1,
        "hour_keys": 3,
        "kv_totals": {"eu-west": "3.24", "us-east": "1.50"},
        "totals": pipeline.RunningTotals(runs=[3, 2], revenue={"eu-west": Decimal("3.25")}),
        "rows": [SimpleNamespace(region="eu-west", orders=3, revenue=Decimal("4.51"))],
    }
    for name, value in broken.items():
        failed = [
            check for check, holds in _outcome(pipeline, **{name: value}).checks() if not holds
        ]
        assert failed, name
    assert pipeline.report(_outcome(pipeline, results=0)) == [
        "batch: one RESULTS message per aggregate row"
    ]


def test_bad_options_exit_with_usage(tmp_path: Path):
    """--events below 10 and --partitions 0 are usage errors (exit 2) before anything starts."""
    for args in (["--events", "5"], ["--partitions", "0"]):
        done = run_example("pipeline.py", args, cwd=tmp_path, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "must be at least" in done.stderr


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1500)
def test_pipeline_with_100k_events_passes_its_self_checks(tmp_path: Path):
    """With no NATS_URL it starts a server, runs steps a-d and every self-check holds."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java 17 or newer")
    done = run_example("pipeline.py", ["--events", "100000"], cwd=tmp_path, timeout=1400)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    out = done.stdout
    assert "started a local nats-server" in out
    assert "a. publish orders: 100,000 msgs" in out
    assert "events read by the batch job (b)" in out
    for line in ("streaming run 1 (c)", "streaming run 2, from its checkpoint (c)"):
        assert line in out
    assert "FAIL" not in out
    assert out.rstrip().endswith("pipeline finished: every check holds")
