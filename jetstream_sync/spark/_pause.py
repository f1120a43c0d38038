"""A test hook of the reads (batch and streaming): pause each task in the middle of its range.

The option ``testPauseDir`` (a directory the driver and the executors share)
makes the first attempt of every read task yield ``testPauseAfterBatches``
Arrow batches (default 1), create ``<dir>/paused-<partition id>`` and wait
until ``<dir>/go`` exists. A test stops or restarts the server meanwhile, so
the rest of the range is read through the fault, deterministically; retried
attempts never pause.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# The longest a paused task waits for ``go`` before failing (a test that forgot it).
PAUSE_LIMIT = 120.0
_POLL = 0.05


def pause_after(batches: Iterator[T], directory: str, count: int) -> Iterator[T]:
    """Yield ``batches``; on a task's first attempt, wait for ``go`` after ``count`` of them.

    Args:
        batches: the task's record batches (a generator that reads lazily).
        directory: the shared directory of the marker files.
        count: how many batches go out before the pause.

    Raises:
        RuntimeError: ``go`` did not appear within ``PAUSE_LIMIT`` seconds.
    """
    from pyspark import TaskContext

    task = TaskContext.get()
    if task is not None and task.attemptNumber() > 0:
        yield from batches
        return
    yielded = 0
    for batch in itertools.islice(batches, count):
        yielded += 1
        yield batch
    if yielded < count:
        return
    partition = task.partitionId() if task is not None else 0
    Path(directory, f"paused-{partition}").touch()
    go = Path(directory, "go")
    deadline = time.monotonic() + PAUSE_LIMIT
    while not go.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"testPauseDir: no {go} within {PAUSE_LIMIT} s")
        time.sleep(_POLL)
    yield from batches
