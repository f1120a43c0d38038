"""The filters Spark pushes down that JetStream cannot apply: subject prefixes and a start time.

A prefix that is not a whole subject token (``subject LIKE 'orders.e%'``)
and a time bound are applied here, to each record batch of
:meth:`Stream.read_arrow`, with Arrow compute kernels (no Python per row).
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc


def keep(
    batch: pa.RecordBatch, prefixes: tuple[str, ...], min_time: datetime | None
) -> pa.RecordBatch:
    """The rows of ``batch`` on subjects with every prefix, stored at or after ``min_time``.

    Args:
        batch: a record batch of the read schema.
        prefixes: subject prefixes every kept row has.
        min_time: the earliest time kept (None: any).
    """
    mask = None
    if min_time is not None:
        ts = batch.column("timestamp")
        # a datetime is whole microseconds, the column's unit: the comparison is exact
        mask = pc.greater_equal(ts, pa.scalar(min_time, type=ts.type))
    for prefix in prefixes:
        starts = pc.starts_with(batch.column("subject"), pattern=prefix)
        mask = starts if mask is None else pc.and_(mask, starts)
    return batch if mask is None else batch.filter(mask)
