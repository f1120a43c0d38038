"""Bucket management on the ``JetStreamContext``: create, bind, list and delete buckets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import BucketNotFoundError, KeyValueError, StreamNotFoundError
from ..jetstream._api import RequiredApiLevelError
from ..jetstream._codec import merge_config
from ._keys import STREAM_PREFIX, check_bucket, stream_name
from .bucket import KeyValue
from .config import KeyValueConfig, KeyValueStatus

if TYPE_CHECKING:
    from ..jetstream.info import StreamInfo
    from ..jetstream.stream import Stream
    from ..jetstream.stream_config import StreamConfig

__all__ = ["KeyValueManagerMixin"]

_ALL_BUCKETS = "$KV.*.>"


def _not_found(bucket: str, exc: StreamNotFoundError) -> BucketNotFoundError:
    return BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found")


class KeyValueManagerMixin:
    """Key-Value bucket management, mixed into :class:`JetStreamContext`."""

    def _kv(self, stream: Stream) -> KeyValue:
        return KeyValue(self, stream.cached_info, self._api.prefix)  # type: ignore[arg-type, attr-defined]

    def _kv_stream_config(
        self, config: KeyValueConfig | None, fields: dict[str, Any], timeout: float | None
    ) -> StreamConfig:
        cfg = merge_config(KeyValueConfig, config, fields)
        if cfg.limit_marker_ttl:
            # ADR-48: limit markers need JetStream API level 1, asked of $JS.API.INFO.
            level = self.account_info(timeout=timeout).api.level  # type: ignore[attr-defined]
            if level < 1:
                raise RequiredApiLevelError(
                    412, 10185, "limit_marker_ttl needs nats-server 2.11 or newer"
                )
        return cfg.stream_config()

    def create_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Create a bucket from a :class:`KeyValueConfig` and/or its fields.

        Creating a bucket that exists with the same settings succeeds.

        Returns:
            A handle on the bucket.

        Raises:
            InvalidBucketNameError, ValueError, TypeError: a bad config, before sending.
            StreamNameInUseError: the bucket exists with other settings.
            RequiredApiLevelError: ``limit_marker_ttl`` on a server older than 2.11.
        """
        scfg = self._kv_stream_config(config, fields, timeout)
        return self._kv(self.create_stream(scfg, timeout=timeout))  # type: ignore[attr-defined]

    def update_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Change an existing bucket's settings.

        Raises:
            BucketNotFoundError: no such bucket.
            APIError: the server refused the change.
        """
        scfg = self._kv_stream_config(config, fields, timeout)
        try:
            stream = self.update_stream(scfg, timeout=timeout)  # type: ignore[attr-defined]
        except StreamNotFoundError as exc:
            raise _not_found(scfg.name.removeprefix(STREAM_PREFIX), exc) from None
        return self._kv(stream)

    def create_or_update_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Update the bucket, or create it when it does not exist."""
        scfg = self._kv_stream_config(config, fields, timeout)
        return self._kv(self.create_or_update_stream(scfg, timeout=timeout))  # type: ignore[attr-defined]

    def key_value(self, bucket: str, timeout: float | None = None) -> KeyValue:
        """A handle on an existing bucket (its stream's info is fetched once).

        Raises:
            InvalidBucketNameError: a bad name, before sending.
            BucketNotFoundError: no such bucket (also a ``StreamNotFoundError``).
            KeyValueError: the stream is not a bucket (no per-key history).
        """
        try:
            stream = self.stream(stream_name(check_bucket(bucket)), timeout=timeout)  # type: ignore[attr-defined]
        except StreamNotFoundError as exc:
            raise _not_found(bucket, exc) from None
        if (stream.cached_info.config.max_msgs_per_subject or 0) < 1:
            raise KeyValueError(f"stream {stream.name!r} is not a Key-Value bucket")
        return self._kv(stream)

    def delete_key_value(self, bucket: str, timeout: float | None = None) -> bool:
        """Delete a bucket and everything in it.

        Raises:
            BucketNotFoundError: no such bucket.
        """
        try:
            return bool(self.delete_stream(stream_name(check_bucket(bucket)), timeout=timeout))  # type: ignore[attr-defined]
        except StreamNotFoundError as exc:
            raise _not_found(bucket, exc) from None

    def key_value_store_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of every bucket, paged lazily."""
        names = self.stream_names(_ALL_BUCKETS, timeout=timeout)  # type: ignore[attr-defined]
        return (n.removeprefix(STREAM_PREFIX) for n in names if n.startswith(STREAM_PREFIX))

    def key_values(self, timeout: float | None = None) -> Iterator[KeyValueStatus]:
        """The status of every bucket, paged lazily."""
        infos: Iterator[StreamInfo] = self.streams(_ALL_BUCKETS, timeout=timeout)  # type: ignore[attr-defined]
        return (
            KeyValueStatus(bucket=i.config.name.removeprefix(STREAM_PREFIX), stream_info=i)
            for i in infos
            if i.config.name.startswith(STREAM_PREFIX)
        )
