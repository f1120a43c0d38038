"""Object Store bucket management through a context's public API (ADR-20).

``JetStreamContext.create_object_store`` and its siblings call these
functions through the room :func:`jetstream_sync.object_store.register`
attaches (the module itself, an ``ObjectStoreRoom`` of ``jetstream/_rooms.py``),
so JetStream never imports Object Store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    ObjectStoreError,
    ObjectStoreExistsError,
    ObjectStoreNotFoundError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from ..jetstream._seam import merge_config
from .config import STREAM_PREFIX, ObjectStoreConfig, ObjectStoreStatus, check_bucket
from .store import ObjectStore

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.info import StreamInfo
    from ..jetstream.stream import Stream

__all__ = [
    "create_object_store",
    "create_or_update_object_store",
    "delete_object_store",
    "object_store",
    "object_store_names",
    "object_stores",
    "update_object_store",
]

_ANY_CHUNKS = "$O.*.C.>"


def _not_found(bucket: str) -> ObjectStoreNotFoundError:
    return ObjectStoreNotFoundError(404, 10059, f"object store {bucket!r} not found")


def _call(
    call: Callable[..., Stream],
    ctx: JetStreamContext,
    config: ObjectStoreConfig | str | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> ObjectStore:
    if isinstance(config, str):  # nats.py's create_object_store("bucket", ...)
        if "bucket" in fields:
            raise TypeError("the bucket is named twice: positionally and as bucket=")
        config, fields = None, {**fields, "bucket": config}
    cfg = merge_config(ObjectStoreConfig, config, fields)
    try:
        stream = call(cfg.stream_config(), timeout=timeout)
    except StreamNameInUseError as exc:
        raise ObjectStoreExistsError(
            exc.code, exc.err_code, f"object store {cfg.bucket!r} exists with another config"
        ) from exc
    except StreamNotFoundError as exc:
        raise _not_found(cfg.bucket) from exc
    return ObjectStore(ctx, cfg.bucket, stream)


def create_object_store(
    ctx: JetStreamContext,
    config: ObjectStoreConfig | str | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> ObjectStore:
    """See :meth:`JetStreamContext.create_object_store`."""
    return _call(ctx.create_stream, ctx, config, fields, timeout)


def update_object_store(
    ctx: JetStreamContext,
    config: ObjectStoreConfig | str | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> ObjectStore:
    """See :meth:`JetStreamContext.update_object_store`."""
    return _call(ctx.update_stream, ctx, config, fields, timeout)


def create_or_update_object_store(
    ctx: JetStreamContext,
    config: ObjectStoreConfig | str | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> ObjectStore:
    """See :meth:`JetStreamContext.create_or_update_object_store`."""
    return _call(ctx.create_or_update_stream, ctx, config, fields, timeout)


def object_store(ctx: JetStreamContext, bucket: str, timeout: float | None) -> ObjectStore:
    """See :meth:`JetStreamContext.object_store`."""
    check_bucket(bucket)
    try:
        stream = ctx.stream(STREAM_PREFIX + bucket, timeout=timeout)
    except StreamNotFoundError as exc:
        raise _not_found(bucket) from exc
    return ObjectStore(ctx, bucket, stream)


def delete_object_store(ctx: JetStreamContext, bucket: str, timeout: float | None) -> bool:
    """See :meth:`JetStreamContext.delete_object_store`."""
    check_bucket(bucket)
    try:
        info = ctx.stream(STREAM_PREFIX + bucket, timeout=timeout).cached_info
        if info is None or not _is_bucket(info, bucket):
            raise ObjectStoreError(
                f"stream {STREAM_PREFIX + bucket!r} is not an Object Store bucket; "
                "nothing was deleted"
            )
        return ctx.delete_stream(STREAM_PREFIX + bucket, timeout=timeout)
    except StreamNotFoundError as exc:
        raise _not_found(bucket) from exc


def _is_bucket(info: StreamInfo, bucket: str) -> bool:
    """Whether a stream named ``OBJ_<bucket>`` holds that bucket (its meta subjects)."""
    return info.config.mirror is not None or f"$O.{bucket}.M.>" in (info.config.subjects or ())


def object_store_names(ctx: JetStreamContext, timeout: float | None) -> Iterator[str]:
    """See :meth:`JetStreamContext.object_store_names`."""
    return (
        name[len(STREAM_PREFIX) :]
        for name in ctx.stream_names(subject=_ANY_CHUNKS, timeout=timeout)
        if name.startswith(STREAM_PREFIX)
    )


def object_stores(ctx: JetStreamContext, timeout: float | None) -> Iterator[ObjectStoreStatus]:
    """See :meth:`JetStreamContext.object_stores`."""

    def status(info: StreamInfo) -> ObjectStoreStatus:
        return ObjectStoreStatus.from_stream_info(info.config.name[len(STREAM_PREFIX) :], info)

    return (
        status(info)
        for info in ctx.streams(subject=_ANY_CHUNKS, timeout=timeout)
        if info.config.name.startswith(STREAM_PREFIX)
    )
