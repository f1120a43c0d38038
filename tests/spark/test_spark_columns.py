"""The Spark filters JetStream cannot apply (subject prefixes, a start time) on read batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from jetstream_sync.jetstream._arrow_decode import read_schema
from jetstream_sync.spark._columns import keep

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 22, 20, 24, 51, 123456, tzinfo=UTC)


def _batch(subjects: list[str]) -> pa.RecordBatch:
    """Rows 1.. on ``subjects``, row i stored at T0 + i seconds."""
    n = len(subjects)
    return pa.RecordBatch.from_pylist(
        [
            {
                "stream": "S",
                "subject": subject,
                "seq": i,
                "timestamp": T0 + timedelta(seconds=i),
                "data": b"",
                "headers": None,
            }
            for i, subject in zip(range(1, n + 1), subjects, strict=True)
        ],
        schema=read_schema(),
    )


def _seqs(batch: pa.RecordBatch) -> list[int]:
    return batch.column("seq").to_pylist()


def test_no_filter_keeps_the_batch_as_it_is():
    """Without prefixes or a start time the batch itself comes back."""
    batch = _batch(["a.x", "b.y"])
    assert keep(batch, (), None) is batch


def test_prefixes_and_start_time():
    """Rows before the start time (to the microsecond) or off any prefix are dropped."""
    batch = _batch(["a.x", "a.y", "b.x", "a.x", "ab"])
    assert _seqs(keep(batch, ("a.",), None)) == [1, 2, 4]
    assert _seqs(keep(batch, ("a", "a.x"), None)) == [1, 4]
    assert _seqs(keep(batch, (), T0 + timedelta(seconds=2))) == [2, 3, 4, 5]
    assert _seqs(keep(batch, (), T0 + timedelta(seconds=2, microseconds=1))) == [3, 4, 5]
    assert _seqs(keep(batch, ("a.",), T0 + timedelta(seconds=2, microseconds=1))) == [4]
