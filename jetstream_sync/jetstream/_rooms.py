"""Where Key-Value and Object Store attach to every ``JetStreamContext``.

``kv/`` and ``object_store/`` are rooms above JetStream, so no module of
``jetstream/`` imports them at run time. Instead each room registers here the
module that does the context's work for it: ``jetstream_sync.kv.register()``
registers ``kv/manager.py``, ``jetstream_sync.object_store.register()``
registers ``object_store/admin.py``, and ``jetstream_sync/__init__.py`` calls
both while the package is imported, before any context can exist. The
context's ``create_key_value()``, ``object_store()``... then call
``ROOMS.key_value`` and ``ROOMS.object_store``.

The two protocols say what the context calls. The handle and config types they
name are imported for the type checker only, the one kind of import
``jetstream/`` makes of those rooms (``tests/test_layering.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..kv import KeyValue, KeyValueConfig, KeyValueStatus
    from ..object_store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus
    from .context import JetStreamContext

__all__ = [
    "ROOMS",
    "KeyValueRoom",
    "ObjectStoreRoom",
    "Rooms",
    "register_key_value",
    "register_object_store",
]


class KeyValueRoom(Protocol):
    """What the context's Key-Value methods call: ``kv/manager.py`` is the one registered."""

    def create_key_value(
        self,
        ctx: JetStreamContext,
        config: KeyValueConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> KeyValue: ...

    def update_key_value(
        self,
        ctx: JetStreamContext,
        config: KeyValueConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> KeyValue: ...

    def create_or_update_key_value(
        self,
        ctx: JetStreamContext,
        config: KeyValueConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> KeyValue: ...

    def key_value(self, ctx: JetStreamContext, bucket: str, timeout: float | None) -> KeyValue: ...

    def delete_key_value(
        self, ctx: JetStreamContext, bucket: str, timeout: float | None
    ) -> bool: ...

    def key_value_store_names(
        self, ctx: JetStreamContext, timeout: float | None
    ) -> Iterator[str]: ...

    def key_values(
        self, ctx: JetStreamContext, timeout: float | None
    ) -> Iterator[KeyValueStatus]: ...


class ObjectStoreRoom(Protocol):
    """What the context's Object Store methods call: ``object_store/admin.py`` is registered."""

    def create_object_store(
        self,
        ctx: JetStreamContext,
        config: ObjectStoreConfig | str | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> ObjectStore: ...

    def update_object_store(
        self,
        ctx: JetStreamContext,
        config: ObjectStoreConfig | str | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> ObjectStore: ...

    def create_or_update_object_store(
        self,
        ctx: JetStreamContext,
        config: ObjectStoreConfig | str | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> ObjectStore: ...

    def object_store(
        self, ctx: JetStreamContext, bucket: str, timeout: float | None
    ) -> ObjectStore: ...

    def delete_object_store(
        self, ctx: JetStreamContext, bucket: str, timeout: float | None
    ) -> bool: ...

    def object_store_names(self, ctx: JetStreamContext, timeout: float | None) -> Iterator[str]: ...

    def object_stores(
        self, ctx: JetStreamContext, timeout: float | None
    ) -> Iterator[ObjectStoreStatus]: ...


class Rooms:
    """The registered rooms: each attribute is set once, by its room's ``register()``."""

    key_value: KeyValueRoom
    object_store: ObjectStoreRoom


ROOMS = Rooms()


def register_key_value(room: KeyValueRoom) -> None:
    """Make ``room`` serve every context's Key-Value methods (``kv.register()`` calls it)."""
    ROOMS.key_value = room


def register_object_store(room: ObjectStoreRoom) -> None:
    """Make ``room`` serve every context's Object Store methods (``object_store.register()``)."""
    ROOMS.object_store = room
