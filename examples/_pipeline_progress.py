"""Progress lines and the table of step rates of ``examples/pipeline.py`` (the main job).

Each step has a :class:`Progress`: while the step runs, a thread prints a
line every second with what was done so far and the rate; at its end one
throughput line, which also goes into :class:`Rates`, the table the job
prints last. For a Spark batch step, "done so far" is the rows its read
stages have read: ``inputMetrics.recordsRead`` of the finished tasks, from
Spark's status store (so a read split into more partitions than cores
reports more often).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepRate:
    """One row of the rate table: ``count`` items (``unit``) in ``seconds`` (0: only a time)."""

    label: str
    count: int
    unit: str
    seconds: float

    @property
    def rate(self) -> float:
        """Items per second (infinite when the step took no measurable time)."""
        return self.count / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Rates:
    """Every step's rate, in the order the steps ran."""

    steps: list[StepRate] = field(default_factory=list)

    def add(self, label: str, count: int, unit: str, seconds: float) -> StepRate:
        """Record one step; return its row."""
        step = StepRate(label, count, unit, seconds)
        self.steps.append(step)
        return step

    def get(self, label: str) -> StepRate:
        """The step named ``label``.

        Raises:
            KeyError: no step of that name ran.
        """
        for step in self.steps:
            if step.label == label:
                return step
        raise KeyError(label)

    def lines(self) -> list[str]:
        """The table: step, count, seconds and rate, one line each, with a header."""
        width = max([len(step.label) for step in self.steps] + [4])
        out = [f"  {'step':<{width}}  {'count':>16}  {'seconds':>8}  {'rate':>16}"]
        for step in self.steps:
            count = f"{step.count:,} {step.unit}" if step.count else ""
            rate = f"{step.rate:,.0f}/s" if step.count else "-"
            out.append(f"  {step.label:<{width}}  {count:>16}  {step.seconds:>8.2f}  {rate:>16}")
        return out


class Progress:
    """A step's progress: ``label: done [/ total] (rate/s) detail`` lines, then its rate.

    Args:
        label: the step's name (in every line and in the rate table).
        rates: the table the step's rate goes into at :meth:`finish`.
        total: the items the step will do, when known.
    """

    def __init__(self, label: str, rates: Rates, total: int | None = None) -> None:
        self.label, self.rates, self.total, self.done = label, rates, total, 0
        self.start = self._last = time.perf_counter()
        self._lock = threading.Lock()

    def update(self, done: int) -> None:
        """Record ``done`` items so far; print a line if a second passed since the last."""
        self.done = done
        if time.perf_counter() - self._last >= 1.0:
            self.line()

    def line(self, detail: str = "") -> None:
        """Print the progress line now, with what is done so far and the rate."""
        with self._lock:
            self._last = now = time.perf_counter()
            count = ""
            if self.done:
                of = f" / {self.total:,}" if self.total else ""
                count = f" {self.done:,}{of} ({self.done / (now - self.start):,.0f}/s)"
            print(f"  {self.label}:{count} {detail}".rstrip(), flush=True)

    def finish(self, done: int = 0, unit: str = "") -> StepRate:
        """Print the step's throughput line (its time alone if ``done`` is 0); record it."""
        self.done = done
        step = self.rates.add(self.label, done, unit, time.perf_counter() - self.start)
        rate = f" ({step.rate:,.0f} {unit}/s)" if done else ""
        print(f"{self.label}: {f'{done:,} {unit} in ' if done else ''}{step.seconds:.2f} s{rate}")
        return step


@contextlib.contextmanager
def reporting(progress: Progress, detail: Callable[[], str]) -> Iterator[None]:
    """While the block runs, a thread prints ``progress`` with ``detail()`` every second.

    ``detail`` may also update ``progress.done``; the thread is stopped and
    joined when the block ends.
    """
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(1.0):
            progress.line(detail())

    thread = threading.Thread(target=report, name="pipeline-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def stage_rows(spark: Any, stage_ids: list[int]) -> int:
    """Rows the given stages have read so far (``inputMetrics.recordsRead`` of finished tasks).

    From Spark's status store (a classic session's JVM); 0 for a stage it no
    longer or not yet holds.
    """
    store = spark.sparkContext._jsc.sc().statusStore()
    rows = 0
    for stage in stage_ids:
        with contextlib.suppress(Exception):  # py4j: the stage is not in the store (yet)
            rows += store.lastStageAttempt(stage).inputRecords()
    return rows


@contextlib.contextmanager
def spark_job(spark: Any, progress: Progress) -> Iterator[None]:
    """Run the block's Spark jobs in a job group; report rows read and tasks every second."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    group = f"pipeline-{progress.label}"

    def detail() -> str:
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        stages = [tracker.getStageInfo(s) for job in jobs if job for s in job.stageIds]
        stages = [stage for stage in stages if stage is not None]
        if not stages:
            return "[spark: planning]"
        progress.done = stage_rows(spark, [stage.stageId for stage in stages])
        done = sum(stage.numCompletedTasks for stage in stages)
        return f"[spark: {done}/{sum(stage.numTasks for stage in stages)} tasks done]"

    context.setJobGroup(group, progress.label)
    try:
        with reporting(progress, detail):
            yield
    finally:
        context.setJobGroup("pipeline", "pipeline")


def streaming_detail(query: Any, progress: Progress) -> Callable[[], str]:
    """A ``reporting`` detail for a streaming query: rows of its finished micro-batches.

    From ``StreamingQuery.recentProgress`` (each micro-batch's ``numInputRows``)
    and the last batch's ``processedRowsPerSecond``.
    """

    def detail() -> str:
        batches = query.recentProgress
        progress.done = sum(batch["numInputRows"] for batch in batches)
        last = (
            f"; last batch {batches[-1]['processedRowsPerSecond']:,.0f} rows/s" if batches else ""
        )
        return f"[{query.status['message']}{last}]"

    return detail
