"""What the ``jetstream`` reader, stream reader and writers share: schema, connections.

Imports pyspark: only the data source modules import it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..jetstream.context import JetStreamContext
from ._client import jetstream
from ._options import Options
from ._plan import StreamPosition

READ_SCHEMA = StructType(
    [
        StructField("stream", StringType()),
        StructField("subject", StringType()),
        StructField("seq", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("data", BinaryType()),
        StructField("headers", MapType(StringType(), ArrayType(StringType()))),
    ]
)


def connection(opts: Options) -> dict[str, Any]:
    """``servers`` and the ``client()`` keyword arguments the options give (plain values)."""
    return {"servers": opts.servers(), **opts.connect_kwargs()}


def context(conn: dict[str, Any]) -> JetStreamContext:
    """The cached JetStream context of a ``connection()`` dict."""
    args = dict(conn)
    return jetstream(args.pop("servers"), **args)


def stream_position(conn: dict[str, Any], stream: str) -> StreamPosition:
    """The stream's first and last sequence, creation time and direct-get support, now."""
    info = context(conn).stream(stream).cached_info
    assert info is not None  # stream() fetched it
    return StreamPosition.of(info)
