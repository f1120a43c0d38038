"""Key-Value buckets on JetStream (ADR-8, ADR-48): ``ctx.create_key_value(bucket=...)``."""

from .bucket import KeyValue
from .config import KeyValueConfig, KeyValueStatus
from .entry import KeyValueEntry, KeyValueOp
from .watch import KeyWatcher

__all__ = [
    "KeyValue",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
]
