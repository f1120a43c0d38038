"""Key-Value buckets on JetStream (ADR-8, ADR-48): ``ctx.create_key_value(bucket=...)``.

A bucket wraps a :class:`~jetstream_sync.JetStreamContext` through its public
methods. Besides the package's public modules it imports, of each lower room,
only its seam (``tests/test_layering.py`` keeps the list):

- the protocol core: ``jetstream_sync._protocol`` (``parse_direct_meta``);
- the client core: ``jetstream_sync._seam`` (deadlines, limits, timestamps,
  ack-subject tokens);
- JetStream: ``jetstream_sync.jetstream._seam`` (config machinery and checks,
  and :func:`register`'s way onto the context).
"""

from ..jetstream._seam import register_key_value
from . import manager
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


def register() -> None:
    """Attach Key-Value to every ``JetStreamContext`` (its bucket methods call ``manager``).

    ``jetstream_sync/__init__.py`` calls this once, on import; users never need to.
    """
    register_key_value(manager)
