"""Object Store values (ADR-20): the bucket config, object meta and info, and bucket status.

:class:`ObjectInfo` is stored as JSON in the payload of the meta message
``$O.<bucket>.M.<base64url(name)>``, the :class:`ObjectMeta` fields inline.
``mtime`` is never written there: it is the meta message's stored time.
Unknown keys another client wrote are kept in ``extra`` and written back.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from .._seam import format_rfc3339, parse_rfc3339
from ..errors import (
    BadObjectMetaError,
    InvalidObjectNameError,
    InvalidObjectStoreNameError,
    LimitExceededError,
)
from ..jetstream._seam import DUR, ENUM, MAP, OBJ, Wire, extra_field, field, strip_nats
from ..jetstream._seam import checks as ck
from ..jetstream.enums import DiscardPolicy, StorageType, StoreCompression
from ..jetstream.info import StreamInfo
from ..jetstream.stream_config import Placement, StreamConfig

__all__ = [
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
]

#: The chunk size of ``put`` when none is given (ADR-20: 128 KiB).
DEFAULT_CHUNK_SIZE = 128 * 1024
DIGEST_PREFIX = "SHA-256="
_BUCKET = re.compile(r"[A-Za-z0-9_-]+")
STREAM_PREFIX = "OBJ_"
_MAX_BUCKET_LEN = ck.MAX_NAME_LEN - len(STREAM_PREFIX)


def check_bucket(bucket: Any, what: str = "bucket") -> str:
    """Validate an Object Store bucket name (ADR-20: ``[A-Za-z0-9_-]+``).

    Raises:
        InvalidObjectStoreNameError: anything else (also a non-``str``).
        LimitExceededError: longer than its stream's name may be (251 bytes).
    """
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        raise InvalidObjectStoreNameError(
            f"{what}: {bucket!r} is not a valid Object Store bucket name "
            "(1 or more of A-Z, a-z, 0-9, '_', '-')"
        )
    if len(bucket) > _MAX_BUCKET_LEN:
        raise LimitExceededError(
            what, len(bucket), _MAX_BUCKET_LEN,
            f"its stream's name, {STREAM_PREFIX}<bucket>, takes at most the server's "
            f"{ck.MAX_NAME_LEN} bytes",
        )  # fmt: skip
    return bucket


def check_object_name(name: Any) -> str:
    """Validate an object name: any non-empty ``str`` (ADR-20 puts no other limit).

    Its length is checked by the bucket's handle (``ObjectStore.max_name_length``:
    the server's line limit, after base64).

    Raises:
        InvalidObjectNameError: empty, not a ``str``, or not encodable as UTF-8
            (a lone surrogate): the name is stored in the object's JSON meta.
    """
    if not isinstance(name, str) or not name:
        raise InvalidObjectNameError(f"an object name must be a non-empty str, got {name!r}")
    try:
        name.encode()
    except UnicodeEncodeError:
        raise InvalidObjectNameError(
            f"an object name must be encodable as UTF-8 (it is stored in JSON), got {name!r}"
        ) from None
    return name


def encode_name(name: str) -> str:
    """The meta subject token of an object name: base64url with padding (as nats.go)."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def digest_value(sha256: bytes) -> str:
    """The ADR's digest form of a raw SHA-256: ``SHA-256=<base64url>``."""
    return DIGEST_PREFIX + base64.urlsafe_b64encode(sha256).decode()


_URL_TO_STANDARD = str.maketrans("-_", "+/")


def decode_digest(digest: str) -> bytes:
    """The raw SHA-256 of a digest in the ADR's form (the algorithm name in any case).

    The ``=`` padding may be left out and the standard base64 alphabet used
    instead of base64url: nats.js wrote digests in those forms.

    Raises:
        BadObjectMetaError: not ``SHA-256=<base64url of 32 bytes>``.
    """
    algo, _, value = digest.partition("=")
    value = value.rstrip("=").translate(_URL_TO_STANDARD)
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:
        raw = b""
    if algo.upper() != DIGEST_PREFIX[:-1] or len(raw) != hashlib.sha256().digest_size:
        raise BadObjectMetaError(f"not a SHA-256 digest in the ADR-20 form: {digest!r}")
    return raw


def _bucket_check(value: str, name: str) -> None:
    check_bucket(value, name)


@attrs.frozen(kw_only=True, repr=False)
class ObjectStoreConfig(Wire):
    """An Object Store bucket: what becomes its stream ``OBJ_<bucket>``.

    Wire keys as nats.go's ``ObjectStoreConfig`` JSON.

    Attributes:
        bucket: the bucket name (``A-Z a-z 0-9 _ -``).
        description: the stream's description.
        ttl: seconds objects are kept (the stream's ``max_age``; ``None``: forever).
        max_bytes: the most bytes the bucket holds (``None`` or 0: unlimited).
        storage: FILE (default) or MEMORY.
        replicas: how many replicas (default 1).
        placement: where the replicas go.
        compression: store the stream S2-compressed.
        metadata: the stream's metadata.
        extra: wire keys this client does not know.
    """

    bucket: str = field("bucket", typ=str, check=_bucket_check, default=attrs.NOTHING)
    description: str | None = field("description", typ=str, check=ck.description)
    ttl: float | None = field("max_age", DUR, check=ck.non_negative)
    max_bytes: int | None = field("max_bytes", typ=int, check=ck.int_range(-1))
    storage: StorageType | None = field("storage", ENUM, cls=StorageType)
    replicas: int | None = field("num_replicas", typ=int, check=ck.int_range(0, ck.MAX_REPLICAS))
    placement: Placement | None = field("placement", OBJ, cls=Placement)
    compression: bool | None = field("compression", typ=bool)
    metadata: Mapping[str, str] | None = field(
        "metadata", MAP, str, check=ck.metadata, eq=strip_nats
    )
    extra: Mapping[str, Any] = extra_field()

    @property
    def stream_name(self) -> str:
        """``OBJ_<bucket>``."""
        return STREAM_PREFIX + self.bucket

    def stream_config(self) -> StreamConfig:
        """The stream config ADR-20 prescribes for this bucket.

        Chunks on ``$O.<bucket>.C.>``, meta on ``$O.<bucket>.M.>``, discard
        new, rollup headers and direct get allowed.
        """
        return StreamConfig(
            name=self.stream_name,
            description=self.description,
            subjects=(f"$O.{self.bucket}.C.>", f"$O.{self.bucket}.M.>"),
            max_age=self.ttl or 0.0,
            max_bytes=self.max_bytes or -1,
            storage=self.storage or StorageType.FILE,
            num_replicas=self.replicas or 1,
            placement=self.placement,
            discard=DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            allow_direct=True,
            compression=StoreCompression.S2 if self.compression else StoreCompression.NONE,
            metadata=self.metadata,
        )

    @classmethod
    def from_stream(cls, config: StreamConfig) -> ObjectStoreConfig:
        """The bucket config an ``OBJ_`` stream's config stands for (no checks: server data)."""
        with ck.lenient():
            return cls(
                bucket=config.name.removeprefix(STREAM_PREFIX),
                description=config.description,
                ttl=config.max_age or None,
                max_bytes=None if config.max_bytes is None or config.max_bytes < 0
                else config.max_bytes,
                storage=config.storage or StorageType.FILE,
                replicas=config.num_replicas or 1,
                placement=config.placement,
                compression=config.compression not in (None, StoreCompression.NONE),
                metadata=strip_nats(config.metadata) or None,
            )  # fmt: skip


def _headers(value: Any) -> dict[str, tuple[str, ...]] | None:
    """Object headers as ``{key: (values...)}``; a single ``str`` value is one value."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"headers: expected a mapping, got {type(value).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for key, values in value.items():
        vals = (values,) if isinstance(values, str) else values
        if not isinstance(key, str) or not isinstance(vals, Sequence):
            raise TypeError("headers: keys must be str and values str or lists of str")
        if not all(isinstance(v, str) for v in vals):
            raise TypeError(f"headers: the values of {key!r} must be str")
        out[key] = tuple(vals)
    return out


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError("metadata: expected a mapping of str to str")
    return dict(value)


_OPT_STR = attrs.validators.optional(attrs.validators.instance_of(str))


@attrs.frozen(kw_only=True)
class ObjectLink:
    """Where a link points: an object of a bucket, or (``name`` None) a whole bucket.

    Attributes:
        bucket: the bucket linked to.
        name: the object linked to; ``None`` for a link to the whole bucket.
    """

    bucket: str = attrs.field(validator=attrs.validators.instance_of(str))
    name: str | None = attrs.field(default=None, validator=_OPT_STR)

    def to_api(self) -> dict[str, Any]:
        """The JSON of the link (``name`` omitted when empty)."""
        out: dict[str, Any] = {"bucket": self.bucket}
        if self.name:
            out["name"] = self.name
        return out

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> ObjectLink:
        """Build from JSON."""
        return cls(bucket=str(d.get("bucket") or ""), name=d.get("name") or None)


@attrs.frozen(kw_only=True)
class ObjectMetaOptions:
    """An object's options.

    Attributes:
        link: set when the object is a link.
        max_chunk_size: the chunk size it was put with.
    """

    link: ObjectLink | None = None
    max_chunk_size: int | None = None

    def to_api(self) -> dict[str, Any]:
        """The JSON of the options (empty fields omitted)."""
        out: dict[str, Any] = {}
        if self.link is not None:
            out["link"] = self.link.to_api()
        if self.max_chunk_size:
            out["max_chunk_size"] = self.max_chunk_size
        return out

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> ObjectMetaOptions:
        """Build from JSON."""
        link = d.get("link")
        return cls(
            link=ObjectLink.from_api(link) if link else None,
            max_chunk_size=d.get("max_chunk_size") or None,
        )


def _meta_to_api(m: ObjectMeta | ObjectInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"name": m.name}
    if m.description:
        out["description"] = m.description
    if m.headers:
        out["headers"] = {k: list(v) for k, v in m.headers.items()}
    if m.metadata:
        out["metadata"] = dict(m.metadata)
    if m.options is not None and m.options.to_api():
        out["options"] = m.options.to_api()
    return out


def _meta_from_api(d: Mapping[str, Any]) -> dict[str, Any]:
    options = d.get("options")
    return {
        "name": str(d.get("name") or ""),
        "description": d.get("description") or None,
        "headers": _headers(d.get("headers") or None),
        "metadata": _metadata(d.get("metadata") or None),
        "options": ObjectMetaOptions.from_api(options) if options else None,
    }


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """What a user says about an object: for :meth:`ObjectStore.update_meta`.

    Attributes:
        name: the object's name (a different one renames it).
        description: free text.
        headers: ``{key: value or [values]}`` stored with the object.
        metadata: ``{key: value}`` stored with the object.
        options: the link and chunk size (kept as they are by ``update_meta``).
    """

    name: str = attrs.field(converter=check_object_name)
    description: str | None = attrs.field(default=None, validator=_OPT_STR)
    headers: Mapping[str, tuple[str, ...]] | None = attrs.field(
        default=None, converter=_headers, hash=False
    )
    metadata: Mapping[str, str] | None = attrs.field(default=None, converter=_metadata, hash=False)
    options: ObjectMetaOptions | None = None

    def to_api(self) -> dict[str, Any]:
        """The JSON of the meta (empty fields omitted)."""
        return _meta_to_api(self)

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> ObjectMeta:
        """Build from JSON."""
        return cls(**_meta_from_api(d))


def _mtime(value: Any) -> datetime | None:
    """A wire ``mtime``: Go's zero time and unreadable values (nats.py's) read as None."""
    if not isinstance(value, str):
        return None
    parsed: datetime
    try:
        parsed = parse_rfc3339(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value).astimezone(UTC)
        except ValueError:
            return None
    return None if parsed.year <= 1 else parsed


@attrs.frozen(kw_only=True)
class ObjectInfo:
    """An object's meta plus what the store knows of it, as stored in its meta message.

    Attributes:
        name, description, headers, metadata, options: as :class:`ObjectMeta`.
        bucket: the bucket holding it.
        nuid: the id of its chunks' subject ``$O.<bucket>.C.<nuid>``.
        size: its size in bytes.
        mtime: when its meta was stored (the message's time; ``None`` if unknown).
        chunks: how many chunks hold it.
        digest: ``SHA-256=<base64url>`` of its bytes (``None`` for links and deletes).
        deleted: it was deleted (only seen with ``show_deleted``).
        extra: JSON keys this client does not know, written back unchanged.
    """

    name: str
    bucket: str
    nuid: str
    size: int = 0
    chunks: int = 0
    mtime: datetime | None = None
    digest: str | None = None
    deleted: bool = False
    description: str | None = None
    headers: Mapping[str, tuple[str, ...]] | None = attrs.field(
        default=None, converter=_headers, hash=False
    )
    metadata: Mapping[str, str] | None = attrs.field(default=None, converter=_metadata, hash=False)
    options: ObjectMetaOptions | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False)

    @property
    def meta(self) -> ObjectMeta:
        """The user part: name, description, headers, metadata, options."""
        return ObjectMeta(
            name=self.name, description=self.description, headers=self.headers,
            metadata=self.metadata, options=self.options,
        )  # fmt: skip

    @property
    def link(self) -> ObjectLink | None:
        """Where this link points, or ``None`` when it is not a link."""
        return self.options.link if self.options is not None else None

    @property
    def is_link(self) -> bool:
        """True when this is a link to an object or a bucket."""
        return self.link is not None

    def to_api(self) -> dict[str, Any]:
        """The ADR-20 JSON (``mtime`` only when set: the stored form has none)."""
        out = _meta_to_api(self)
        out.update(bucket=self.bucket, nuid=self.nuid, size=self.size, chunks=self.chunks)
        if self.mtime is not None:
            out["mtime"] = format_rfc3339(self.mtime)
        if self.digest:
            out["digest"] = self.digest
        if self.deleted:
            out["deleted"] = True
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def stored_json(self) -> dict[str, Any]:
        """The JSON written to the meta message: :meth:`to_api` without ``mtime``."""
        out = self.to_api()
        out.pop("mtime", None)
        return out

    @classmethod
    def from_api(cls, d: Mapping[str, Any], mtime: datetime | None = None) -> ObjectInfo:
        """Build from JSON; ``mtime`` (the meta message's time) wins over a stored one.

        Raises:
            TypeError, ValueError: ``d`` is not an object's info.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"ObjectInfo.from_api expects a dict, got {type(d).__name__}")
        known = {"name", "description", "headers", "metadata", "options", "bucket", "nuid",
                 "size", "mtime", "chunks", "digest", "deleted"}  # fmt: skip
        return cls(
            **_meta_from_api(d),
            bucket=str(d.get("bucket") or ""),
            nuid=str(d.get("nuid") or ""),
            size=int(d.get("size") or 0),
            chunks=int(d.get("chunks") or 0),
            mtime=mtime if mtime is not None else _mtime(d.get("mtime")),
            digest=d.get("digest") or None,
            deleted=bool(d.get("deleted")),
            extra={k: v for k, v in d.items() if k not in known},
        )


@attrs.frozen(kw_only=True)
class ObjectStoreStatus:
    """A bucket's status, from its stream's info.

    Attributes:
        bucket: the bucket name.
        description: the description given at creation.
        ttl: seconds objects are kept (``None``: forever).
        storage: FILE or MEMORY.
        replicas: how many replicas.
        sealed: the bucket takes no more changes.
        size: bytes stored, meta included.
        compressed: stored S2-compressed.
        metadata: the bucket's metadata (server ``_nats.*`` keys removed).
        backing_store: always ``"JetStream"``.
        stream_info: the stream's full info.
    """

    bucket: str
    description: str | None
    ttl: float | None
    storage: StorageType | None
    replicas: int
    sealed: bool
    size: int
    compressed: bool
    metadata: Mapping[str, str] | None = attrs.field(hash=False)
    stream_info: StreamInfo = attrs.field(eq=False, repr=False)
    backing_store: str = "JetStream"

    @property
    def config(self) -> ObjectStoreConfig:
        """The bucket's config (to change some of it: ``update_object_store(status.config,
        ttl=60.0)``)."""
        return ObjectStoreConfig.from_stream(self.stream_info.config)

    @classmethod
    def from_stream_info(cls, bucket: str, info: StreamInfo) -> ObjectStoreStatus:
        """Build from the bucket stream's info."""
        cfg = info.config
        compression = cfg.compression
        return cls(
            bucket=bucket,
            description=cfg.description,
            ttl=cfg.max_age or None,
            storage=cfg.storage,
            replicas=cfg.num_replicas or 1,
            sealed=bool(cfg.sealed),
            size=info.state.bytes if info.state is not None else 0,
            compressed=compression is not None and compression != StoreCompression.NONE,
            metadata=strip_nats(cfg.metadata),
            stream_info=info,
        )
