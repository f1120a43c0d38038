"""Object Store buckets on JetStream (ADR-20): ``ctx.create_object_store(bucket=...)``.

``store`` holds the bucket handle (put, get, links, ...), ``config`` the
bucket config and object infos, ``watch`` the watcher, ``admin`` bucket
management (what the context's bucket methods call, once :func:`register`
has attached it).

A bucket wraps a :class:`~jetstream_sync.JetStreamContext` through its public
methods. Besides the package's public modules it imports, of each lower room,
only its seam (``tests/test_layering.py`` keeps the list):

- the client core: ``jetstream_sync._seam`` (deadlines, timestamps, NUIDs);
- JetStream: ``jetstream_sync.jetstream._seam`` (config machinery and checks,
  and :func:`register`'s way onto the context).
"""

from ..jetstream._seam import register_object_store
from . import admin
from .config import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    ObjectStoreStatus,
)
from .store import ObjectStore
from .watch import ObjectWatcher

__all__ = [
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
]


def register() -> None:
    """Attach Object Store to every ``JetStreamContext`` (its bucket methods call ``admin``).

    ``jetstream_sync/__init__.py`` calls this once, on import; users never need to.
    """
    register_object_store(admin)
