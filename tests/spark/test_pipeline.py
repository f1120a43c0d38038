"""examples/pipeline.py, the README's main job: JetStream -> Spark -> RESULTS and KV."""

from __future__ import annotations

import importlib.util
import os
import re
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
    if str(EXAMPLES) not in sys.path:  # it imports its helper _pipeline_progress as a script does
        sys.path.insert(0, str(EXAMPLES))
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
    assert pipeline.report(_outcome(pipeline, results=0), pipeline.Rates()) == [
        "batch: one RESULTS message per aggregate row"
    ]


def test_batch_only_outcome_checks_and_shows_the_batch_step_alone():
    """Without step c (--batch-only) the checks and the summary are the batch job's only."""
    pipeline = _pipeline_module()
    outcome = _outcome(pipeline, second=None, totals=pipeline.RunningTotals())
    checks = [name for name, _ in outcome.checks()]
    assert checks and all(name.startswith("batch:") for name in checks)
    assert all(holds for _, holds in outcome.checks())
    assert all("(c)" not in name and "KV revenue" not in name for name, _ in outcome.table())
    no_rows = _outcome(pipeline, second=None, totals=pipeline.RunningTotals(), rows=[])
    assert ("batch: events read == events published", False) in no_rows.checks()


def test_rate_table_lists_every_step_with_its_count_time_and_rate(capsys):
    """A table row per step: count and unit, seconds, rate (a step timed alone: no rate)."""
    pipeline = _pipeline_module()
    from _pipeline_progress import Progress, Rates

    rates = Rates()
    Progress("spark start", rates).finish()
    rates.add("a. publish orders", 1000, "msgs", 0.5)
    rates.add("b. batch", 3000, "events", 2.0)
    assert capsys.readouterr().out.startswith("spark start: ")
    header, start, publish, batch = rates.lines()
    assert header.split() == ["step", "count", "seconds", "rate"]
    assert start.split()[:2] == ["spark", "start"] and start.rstrip().endswith("-")
    assert publish.split()[-4:] == ["1,000", "msgs", "0.50", "2,000/s"]
    assert batch.split()[-4:] == ["3,000", "events", "2.00", "1,500/s"]
    assert rates.get("b. batch").rate == 1500
    report = pipeline.report(_outcome(pipeline), rates)
    assert report == []
    out = capsys.readouterr().out
    assert out.index("d. summary") < out.index("rates") < out.index("a. publish orders")


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
    # progress lines count rows read so far with their rate, not only tasks: each
    # line printed after a task finished says how many rows (whether a line falls
    # between two tasks' ends is the machine's timing, so it is not required)
    batch = re.findall(r"^  b\. spark batch: read and aggregate: (.*)$", out, re.M)
    assert batch, out
    finished = [line for line in batch if re.search(r"\[spark: [1-9]\d*/\d+ tasks done\]", line)]
    assert all(re.match(r"[\d,]+ \([\d,]+/s\) \[spark:", line) for line in finished), out
    stream = re.compile(
        r"^  c\. streaming run 1 \(catch up\): [\d,]+ \(.*last batch [\d,]+ rows/s", re.M
    )
    assert stream.search(out), out
    # the rate table has a row per step, the data source alone beside the batch step
    table = out[out.index("\nrates\n") :]
    for step in (
        "spark start (JVM, Python workers)",
        "a. publish orders",
        "b. spark batch: read and aggregate",
        "b. the data source alone: read -> count",
        "b. spark batch: write RESULTS and revenue",
        "c. streaming run 1 (catch up)",
        "c. publish new orders",
        "c. streaming run 2 (from checkpoint)",
        "c. write region totals to revenue",
        "d. read back for the checks",
    ):
        assert re.search(rf"^  {re.escape(step)} .*\d/s$", table, re.M) or step.startswith(
            "spark start"
        ), (step, table)
    assert re.search(r"^  b\. spark batch: read and aggregate +100,000 events ", table, re.M)
