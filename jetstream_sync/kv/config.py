"""``KeyValueConfig`` (a bucket's settings), its stream (ADR-8, ADR-48, ADR-57) and
``KeyValueStatus``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import attrs

from .._seam import check_at_most_max
from ..jetstream._seam import checks as ck
from ..jetstream._seam import strip_nats
from ..jetstream.enums import DiscardPolicy, StorageType, StoreCompression
from ..jetstream.info import StreamInfo
from ..jetstream.stream_config import (
    Placement,
    Republish,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from ._keys import STREAM_PREFIX, check_bucket, stream_name

__all__ = ["KeyValueConfig", "KeyValueStatus", "MAX_HISTORY"]

MAX_HISTORY = 64
#: The duplicate window of a bucket without TTL (and the cap with one).
DUPLICATE_WINDOW = 120.0


def _seconds(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field}: expected seconds as float, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: must be a finite number of seconds >= 0, not {value!r}")
    return check_at_most_max(field, float(value))


def _ttl(value: float | timedelta | None) -> float | None:
    return _seconds(value, "ttl")


def _limit_marker_ttl(value: float | timedelta | None) -> float | None:
    return _seconds(value, "limit_marker_ttl")


def _storage(value: StorageType | str) -> StorageType:
    return StorageType(value)


def _metadata(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if value is None else dict(value)


def _int(value: Any, field: str, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field}: expected int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{field}: must be {lo}..{hi}, not {value}")


def _of(cls: type[Any], field: str, value: Any) -> None:
    if value is not None and not isinstance(value, cls):
        raise TypeError(f"{field}: expected {cls.__name__}, got {type(value).__name__}")


def _sources(value: Iterable[StreamSource] | None) -> tuple[StreamSource, ...] | None:
    if value is None:
        return None
    items = tuple(value)
    for item in items:
        _of(StreamSource, "sources", item)
    return items


@attrs.frozen(kw_only=True)
class KeyValueConfig:
    """A bucket's settings (ADR-8). Durations are float seconds (``timedelta`` is accepted).

    Attributes:
        bucket: the bucket's name (``a-z A-Z 0-9 _ -``).
        description: free text.
        max_value_size: the largest value, in bytes (``None``: unlimited).
        history: revisions kept per key, 1 to 64.
        ttl: seconds a value is kept (``None`` or 0: forever).
        max_bytes: the most bytes the bucket holds (``None``: unlimited).
        storage: FILE (default) or MEMORY.
        replicas: copies kept, 1 to 5.
        allow_direct: answer gets from any replica (ADR-8 says always on).
        placement: where replicas may go.
        republish: republish stored entries to other subjects.
        mirror: the bucket (or ``KV_`` stream) this one mirrors; writes go to
            the origin, reads are served by the mirror.
        sources: buckets (or streams, with explicit subject transforms) this
            one sources from.
        compression: S2-compress the bucket on disk.
        limit_marker_ttl: seconds the markers left when the TTL (or a
            per-key TTL) removes a key are kept; enables per-key TTLs
            (server 2.11+, at least 1 s).
        metadata: user key/values stored with the bucket.

    Raises:
        InvalidBucketNameError: a bad bucket name (also a ``ValueError``).
        ValueError, TypeError: any other bad field, at construction.
    """

    bucket: str = attrs.field()
    description: str | None = None
    max_value_size: int | None = None
    history: int = 1
    ttl: float | None = attrs.field(default=None, converter=_ttl)
    max_bytes: int | None = None
    storage: StorageType = attrs.field(default=StorageType.FILE, converter=_storage)
    replicas: int = 1
    allow_direct: bool = True
    placement: Placement | None = None
    republish: Republish | None = None
    mirror: StreamSource | None = None
    sources: tuple[StreamSource, ...] | None = attrs.field(default=None, converter=_sources)
    compression: bool = False
    limit_marker_ttl: float | None = attrs.field(default=None, converter=_limit_marker_ttl)
    metadata: Mapping[str, str] | None = attrs.field(default=None, converter=_metadata)

    def __attrs_post_init__(self) -> None:
        if not ck.checking():
            return
        check_bucket(self.bucket)
        _int(self.history, "history", 1, MAX_HISTORY)
        _int(self.replicas, "replicas", 1, ck.MAX_REPLICAS)
        if self.max_value_size is not None:  # the stream's max_msg_size: an int32
            _int(self.max_value_size, "max_value_size", -1, ck.MAX_INT32)
        if self.max_bytes is not None:
            _int(self.max_bytes, "max_bytes", -1, ck.MAX_INT64)
        if self.description is not None:
            _of(str, "description", self.description)
            ck.description(self.description, "description")
        _of(Placement, "placement", self.placement)
        _of(Republish, "republish", self.republish)
        _of(StreamSource, "mirror", self.mirror)
        if self.metadata is not None:
            ck.metadata(self.metadata, "metadata")
        if self.limit_marker_ttl is not None and 0 < self.limit_marker_ttl < 1.0:
            ck.fail("limit_marker_ttl", f"must be at least 1 s, not {self.limit_marker_ttl}")
        if self.mirror is not None and self.sources:
            ck.fail("mirror", "a mirrored bucket cannot also have sources")

    def stream_config(self) -> StreamConfig:
        """The ``KV_<bucket>`` stream this bucket is, with ADR-8's fixed settings.

        Raises:
            ValueError: the combination is not a valid stream (e.g. a mirror
                with ``limit_marker_ttl``).
        """
        window = DUPLICATE_WINDOW
        if self.ttl and self.ttl < window:
            window = self.ttl
        fields: dict[str, Any] = dict(
            name=stream_name(self.bucket),
            description=self.description,
            max_msgs_per_subject=self.history,
            max_bytes=self.max_bytes if self.max_bytes else -1,
            max_age=self.ttl or 0.0,
            max_msg_size=self.max_value_size if self.max_value_size else -1,
            storage=self.storage,
            num_replicas=self.replicas,
            placement=self.placement,
            allow_rollup_hdrs=True,
            deny_delete=True,
            duplicate_window=window,
            max_msgs=-1,
            max_consumers=-1,
            allow_direct=self.allow_direct,
            republish=self.republish,
            compression=StoreCompression.S2 if self.compression else StoreCompression.NONE,
            discard=DiscardPolicy.NEW,
            metadata=self.metadata,
        )
        if self.limit_marker_ttl:
            fields.update(allow_msg_ttl=True, subject_delete_marker_ttl=self.limit_marker_ttl)
        if self.mirror is not None:
            fields.update(mirror=_kv_mirror(self.mirror), mirror_direct=True)
        else:
            fields["subjects"] = (f"$KV.{self.bucket}.>",)
            if self.sources:
                fields["sources"] = tuple(self._source(s) for s in self.sources)
        return StreamConfig(**fields)

    def _source(self, source: StreamSource) -> StreamSource:
        """ADR-57: a source without transforms is a bucket; map its keys into this one."""
        if source.subject_transforms:
            return source
        origin = source.name.removeprefix(STREAM_PREFIX)
        if source.external is not None and origin == self.bucket:
            return _kv_stream(source)
        keys, src_bucket = source.filter_subject or ">", origin
        if keys.startswith("$KV."):
            src_bucket, _, keys = keys.removeprefix("$KV.").partition(".")
        transform = SubjectTransform(
            src=f"$KV.{src_bucket}.{keys}", dest=f"$KV.{self.bucket}.{_same_keys(keys)}"
        )
        return attrs.evolve(
            source,
            name=stream_name(origin),
            filter_subject=None,
            subject_transforms=(transform,),
        )

    @classmethod
    def from_stream(cls, config: StreamConfig) -> KeyValueConfig:
        """The bucket settings a ``KV_`` stream's config stands for (no checks: server data)."""
        with ck.lenient():
            return cls(
                bucket=config.name.removeprefix(STREAM_PREFIX),
                description=config.description,
                max_value_size=_unlimited(config.max_msg_size),
                history=config.max_msgs_per_subject or 1,
                ttl=config.max_age or None,
                max_bytes=_unlimited(config.max_bytes),
                storage=config.storage or StorageType.FILE,
                replicas=config.num_replicas or 1,
                allow_direct=bool(config.allow_direct),
                placement=config.placement,
                republish=config.republish,
                mirror=config.mirror,
                sources=config.sources,
                compression=config.compression not in (None, StoreCompression.NONE),
                limit_marker_ttl=config.subject_delete_marker_ttl or None,
                metadata=strip_nats(config.metadata) or None,
            )


def _kv_mirror(mirror: StreamSource) -> StreamSource:
    """``mirror`` naming its bucket's ``KV_`` stream, a key filter made a subject filter.

    As for sources, ``filter_subject`` names keys (``cfg.>``) or is a whole
    ``$KV.`` subject (nats.go's form, kept as it is).
    """
    mirror = _kv_stream(mirror)
    keys = mirror.filter_subject
    if not keys or keys.startswith("$KV."):
        return mirror
    origin = mirror.name.removeprefix(STREAM_PREFIX)
    return attrs.evolve(mirror, filter_subject=f"$KV.{origin}.{keys}")


def _same_keys(keys: str) -> str:
    """The transform destination giving each key matched by ``keys`` its own name.

    The server refuses a ``*`` in a destination; ``{{wildcard(n)}}`` names the
    n-th one of the source, and a trailing ``>`` maps onto itself.
    """
    tokens = keys.split(".")
    n = 0
    for i, token in enumerate(tokens):
        if token == "*":
            n += 1
            tokens[i] = f"{{{{wildcard({n})}}}}"
    return ".".join(tokens)


def _unlimited(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


def _kv_stream(source: StreamSource) -> StreamSource:
    """``source`` naming the ``KV_`` stream of its bucket."""
    if source.name.startswith(STREAM_PREFIX):
        return source
    return attrs.evolve(source, name=stream_name(source.name))


@attrs.frozen(kw_only=True)
class KeyValueStatus:
    """A bucket's status (ADR-8 ``Status``), from its stream's info.

    Attributes:
        bucket: the bucket's name.
        stream_info: the full info of the ``KV_<bucket>`` stream.
    """

    bucket: str
    stream_info: StreamInfo

    @property
    def values(self) -> int:
        """Entries stored, historical revisions and markers included."""
        return self.stream_info.state.messages if self.stream_info.state else 0

    @property
    def history(self) -> int:
        """Revisions kept per key."""
        return int(self.stream_info.config.max_msgs_per_subject or 0)

    @property
    def ttl(self) -> float:
        """Seconds values are kept (0: forever)."""
        return self.stream_info.config.max_age or 0.0

    @property
    def limit_marker_ttl(self) -> float:
        """Seconds limit markers are kept (0: markers are off)."""
        return self.stream_info.config.subject_delete_marker_ttl or 0.0

    @property
    def is_compressed(self) -> bool:
        """Whether the bucket is compressed on disk."""
        return self.stream_info.config.compression not in (None, StoreCompression.NONE)

    @property
    def backing_store(self) -> str:
        """The kind of backend: ``"JetStream"``."""
        return "JetStream"

    @property
    def bytes(self) -> int:
        """Bytes stored."""
        return self.stream_info.state.bytes if self.stream_info.state else 0

    @property
    def metadata(self) -> dict[str, str]:
        """The bucket's user metadata (the server's ``_nats.*`` keys left out)."""
        return strip_nats(self.stream_info.config.metadata) or {}

    @property
    def config(self) -> KeyValueConfig:
        """The bucket's settings."""
        return KeyValueConfig.from_stream(self.stream_info.config)
