"""Object Store bucket management on a ``JetStreamContext`` (a mixin of its class)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import (
    ObjectStoreExistsError,
    ObjectStoreNotFoundError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from .jetstream._codec import merge_config
from .object_config import ObjectStoreConfig, ObjectStoreStatus, check_bucket
from .object_store import ObjectStore

if TYPE_CHECKING:
    from .jetstream.context import JetStreamContext
    from .jetstream.info import StreamInfo
    from .jetstream.stream import Stream

__all__ = ["ObjectStoresMixin"]

_PREFIX = "OBJ_"
_ANY_CHUNKS = "$O.*.C.>"


def _not_found(bucket: str) -> ObjectStoreNotFoundError:
    return ObjectStoreNotFoundError(404, 10059, f"object store {bucket!r} not found")


class ObjectStoresMixin:
    """Create, bind, list and delete Object Store buckets (ADR-20)."""

    def _obj_call(
        self,
        call: Callable[..., Stream],
        config: ObjectStoreConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> ObjectStore:
        cfg = merge_config(ObjectStoreConfig, config, fields)
        ctx: JetStreamContext = self  # type: ignore[assignment]
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
        self, config: ObjectStoreConfig | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Create a bucket from an :class:`ObjectStoreConfig` and/or its fields.

        Creating a bucket that exists with the same config succeeds.

        Raises:
            ObjectStoreExistsError: the bucket exists with another config.
            InvalidObjectStoreNameError, ValueError, TypeError: a bad config,
                raised before sending.
        """
        ctx: JetStreamContext = self  # type: ignore[assignment]
        return self._obj_call(ctx.create_stream, config, fields, timeout)

    def update_object_store(
        self, config: ObjectStoreConfig | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Change an existing bucket's config.

        Raises:
            ObjectStoreNotFoundError: no such bucket.
            APIError: the server refused the change (e.g. storage type).
        """
        ctx: JetStreamContext = self  # type: ignore[assignment]
        return self._obj_call(ctx.update_stream, config, fields, timeout)

    def create_or_update_object_store(
        self, config: ObjectStoreConfig | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Update the bucket, or create it when it does not exist."""
        ctx: JetStreamContext = self  # type: ignore[assignment]
        return self._obj_call(ctx.create_or_update_stream, config, fields, timeout)

    def object_store(self, bucket: str, timeout: float | None = None) -> ObjectStore:
        """A handle on an existing bucket (its stream info fetched once).

        Raises:
            ObjectStoreNotFoundError: no such bucket.
            InvalidObjectStoreNameError: ``bucket`` is not a valid name.
        """
        ctx: JetStreamContext = self  # type: ignore[assignment]
        check_bucket(bucket)
        try:
            stream = ctx.stream(_PREFIX + bucket, timeout=timeout)
        except StreamNotFoundError as exc:
            raise _not_found(bucket) from exc
        return ObjectStore(ctx, bucket, stream)

    def delete_object_store(self, bucket: str, timeout: float | None = None) -> bool:
        """Delete a bucket and every object in it.

        Raises:
            ObjectStoreNotFoundError: no such bucket.
        """
        ctx: JetStreamContext = self  # type: ignore[assignment]
        check_bucket(bucket)
        try:
            return ctx.delete_stream(_PREFIX + bucket, timeout=timeout)
        except StreamNotFoundError as exc:
            raise _not_found(bucket) from exc

    def object_store_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of every Object Store bucket, paged lazily."""
        ctx: JetStreamContext = self  # type: ignore[assignment]
        return (
            name[len(_PREFIX) :]
            for name in ctx.stream_names(subject=_ANY_CHUNKS, timeout=timeout)
            if name.startswith(_PREFIX)
        )

    def object_stores(self, timeout: float | None = None) -> Iterator[ObjectStoreStatus]:
        """The status of every Object Store bucket, paged lazily."""
        ctx: JetStreamContext = self  # type: ignore[assignment]

        def status(info: StreamInfo) -> ObjectStoreStatus:
            return ObjectStoreStatus.from_stream_info(info.config.name[len(_PREFIX) :], info)

        return (
            status(info)
            for info in ctx.streams(subject=_ANY_CHUNKS, timeout=timeout)
            if info.config.name.startswith(_PREFIX)
        )
