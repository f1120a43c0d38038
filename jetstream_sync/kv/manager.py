"""Bucket management: create, bind, list and delete buckets through a context's public API.

``JetStreamContext.create_key_value`` and its siblings call these functions
through the room :func:`jetstream_sync.kv.register` attaches (the module itself,
a ``KeyValueRoom`` of ``jetstream/_rooms.py``), so JetStream never imports Key-Value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import BucketNotFoundError, KeyValueError, RequiredApiLevelError, StreamNotFoundError
from ..jetstream._seam import merge_config
from ._keys import STREAM_PREFIX, check_bucket, stream_name
from .bucket import KeyValue
from .config import KeyValueConfig, KeyValueStatus

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.stream import Stream
    from ..jetstream.stream_config import StreamConfig

__all__ = [
    "create_key_value",
    "create_or_update_key_value",
    "delete_key_value",
    "key_value",
    "key_value_store_names",
    "key_values",
    "update_key_value",
]

_ALL_BUCKETS = "$KV.*.>"


def _not_found(bucket: str, exc: StreamNotFoundError) -> BucketNotFoundError:
    return BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found")


def _handle(ctx: JetStreamContext, stream: Stream, timeout: float | None) -> KeyValue:
    # A stream made by a create, update or bind call carries its info already.
    return KeyValue(ctx, stream.cached_info or stream.info(timeout=timeout), ctx.api_prefix)


def _stream_config(
    ctx: JetStreamContext,
    config: KeyValueConfig | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> StreamConfig:
    cfg = merge_config(KeyValueConfig, config, fields)
    if cfg.limit_marker_ttl:
        # ADR-48: limit markers need JetStream API level 1, asked of $JS.API.INFO.
        api = ctx.account_info(timeout=timeout).api
        if api is None or api.level < 1:
            raise RequiredApiLevelError(
                412, 10185, "limit_marker_ttl needs nats-server 2.11 or newer"
            )
    return cfg.stream_config()


def create_key_value(
    ctx: JetStreamContext,
    config: KeyValueConfig | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> KeyValue:
    """See :meth:`JetStreamContext.create_key_value`."""
    scfg = _stream_config(ctx, config, fields, timeout)
    return _handle(ctx, ctx.create_stream(scfg, timeout=timeout), timeout)


def update_key_value(
    ctx: JetStreamContext,
    config: KeyValueConfig | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> KeyValue:
    """See :meth:`JetStreamContext.update_key_value`."""
    scfg = _stream_config(ctx, config, fields, timeout)
    try:
        stream = ctx.update_stream(scfg, timeout=timeout)
    except StreamNotFoundError as exc:
        raise _not_found(scfg.name.removeprefix(STREAM_PREFIX), exc) from None
    return _handle(ctx, stream, timeout)


def create_or_update_key_value(
    ctx: JetStreamContext,
    config: KeyValueConfig | None,
    fields: dict[str, Any],
    timeout: float | None,
) -> KeyValue:
    """See :meth:`JetStreamContext.create_or_update_key_value`."""
    scfg = _stream_config(ctx, config, fields, timeout)
    return _handle(ctx, ctx.create_or_update_stream(scfg, timeout=timeout), timeout)


def key_value(ctx: JetStreamContext, bucket: str, timeout: float | None) -> KeyValue:
    """See :meth:`JetStreamContext.key_value`."""
    try:
        stream = ctx.stream(stream_name(check_bucket(bucket)), timeout=timeout)
    except StreamNotFoundError as exc:
        raise _not_found(bucket, exc) from None
    info = stream.cached_info
    if info is None or (info.config.max_msgs_per_subject or 0) < 1:
        raise KeyValueError(f"stream {stream.name!r} is not a Key-Value bucket")
    return KeyValue(ctx, info, ctx.api_prefix)


def delete_key_value(ctx: JetStreamContext, bucket: str, timeout: float | None) -> bool:
    """See :meth:`JetStreamContext.delete_key_value`."""
    key_value(ctx, bucket, timeout)  # a stream that is not a bucket is refused, not deleted
    try:
        return bool(ctx.delete_stream(stream_name(check_bucket(bucket)), timeout=timeout))
    except StreamNotFoundError as exc:
        raise _not_found(bucket, exc) from None


def key_value_store_names(ctx: JetStreamContext, timeout: float | None) -> Iterator[str]:
    """See :meth:`JetStreamContext.key_value_store_names`."""
    names = ctx.stream_names(_ALL_BUCKETS, timeout=timeout)
    return (n.removeprefix(STREAM_PREFIX) for n in names if n.startswith(STREAM_PREFIX))


def key_values(ctx: JetStreamContext, timeout: float | None) -> Iterator[KeyValueStatus]:
    """See :meth:`JetStreamContext.key_values`."""
    return (
        KeyValueStatus(bucket=i.config.name.removeprefix(STREAM_PREFIX), stream_info=i)
        for i in ctx.streams(_ALL_BUCKETS, timeout=timeout)
        if i.config.name.startswith(STREAM_PREFIX)
    )
