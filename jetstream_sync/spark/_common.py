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
from ._options import Options, Role, canonical
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
#: The read schema with ``includeHeaders=false``: no ``headers`` column.
READ_SCHEMA_WITHOUT_HEADERS = StructType([f for f in READ_SCHEMA.fields if f.name != "headers"])


def read_schema(raw: Any) -> StructType:
    """The read schema the raw options ask for: ``includeHeaders=false`` drops ``headers``.

    Kafka's source returns headers only with ``includeHeaders=true``; this
    one keeps them by default, so existing reads keep their schema.

    Raises:
        ValueError: ``includeHeaders`` is neither true nor false.
    """
    values = {canonical(str(k)): str(v) for k, v in dict(raw).items() if v is not None}
    opts = Options({"includeHeaders": values["includeheaders"]} if "includeheaders" in values
                   else {}, Role("the read schema", ("includeHeaders",)))  # fmt: skip
    return READ_SCHEMA if opts.boolean("includeHeaders", True) else READ_SCHEMA_WITHOUT_HEADERS


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


def refuse_overwrite(overwrite: bool, what: str) -> None:
    """Refuse a batch write in ``mode("overwrite")``: the sinks only add, as Kafka's does.

    Args:
        overwrite: whether Spark asked the batch writer to overwrite.
        what: what the sink cannot replace (``the messages of the stream``).

    Raises:
        ValueError: ``overwrite`` is true.
    """
    if overwrite:
        raise ValueError(
            f'mode("overwrite") would leave {what} in place and add the rows: this sink '
            'only appends; write with mode("append")'
        )
