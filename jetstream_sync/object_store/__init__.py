"""Object Store buckets on JetStream (ADR-20): ``ctx.create_object_store(bucket=...)``.

``store`` holds the bucket handle (put, get, links, ...), ``config`` the
bucket config and object infos, ``watch`` the watcher, ``admin`` bucket
management (reached through the context's delegators).
"""

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
