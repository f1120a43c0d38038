"""The columns of a columnar publish, checked and laid out for the protocol core's batch encoder.

Both columnar publishes, :meth:`JetStreamContext.publish_arrow` (each row
acknowledged) and :meth:`FastBatch.add_arrow` (rows of a fast-ingest batch),
take the same table: ``data`` (binary or string, required), ``subject``
(string), ``headers`` (a map of string to string or to a list of strings) and
``msgId`` (string). This module refuses a table they cannot send, before
anything is sent, and turns a record batch into the ``BatchColumn``s that
``_protocol.encode_batch_hpub`` reads in place.

Needs pyarrow (imported with this module).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .. import _protocol
from .._subjects import is_publish_subject
from ..errors import BadSubjectError
from ._arrow_decode import import_pyarrow

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    pa = import_pyarrow("publish_arrow and FastBatch.add_arrow")
    import pyarrow.compute as pc

__all__ = ["ADDED_HEADERS", "COLUMNS", "RowColumns", "record_batches"]

COLUMNS = ("data", "subject", "headers", "msgId")
MSG_ID = "Nats-Msg-Id"
#: Headers every row of a columnar publish gets, unless the row has one of the same name:
#: the OpenTelemetry instrumentation sets its span's trace context here for the call.
ADDED_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar(
    "jetstream_sync_arrow_added_headers", default=None
)


def record_batches(
    table: pa.Table | pa.RecordBatch, subject: str | None, msg_id_prefix: str | None, what: str
) -> list[pa.RecordBatch]:
    """The record batches of ``table``, once it and the call's arguments are checked.

    Args:
        table: the rows.
        subject: the subject of rows without one, or None.
        msg_id_prefix: what derived message ids start with, or None.
        what: the call, named in errors (``publish_arrow``).

    Raises:
        TypeError: not a Table or RecordBatch, or a column of another type.
        ValueError: an unknown, repeated or missing column; CR or LF in
            ``msg_id_prefix``.
        BadSubjectError: ``subject`` is not one to publish to.
    """
    if isinstance(table, pa.Table):
        batches: list[pa.RecordBatch] = table.to_batches()
    elif isinstance(table, pa.RecordBatch):
        batches = [table]
    else:
        raise TypeError(f"{what} takes a pyarrow Table or RecordBatch, not {type(table).__name__}")
    _check_columns(table.schema, subject, what)
    if subject is not None and not is_publish_subject(subject):
        raise BadSubjectError(f"{what}: subject {subject!r} is not a publish subject")
    if msg_id_prefix is not None and ("\r" in msg_id_prefix or "\n" in msg_id_prefix):
        raise ValueError(f"{what}: msg_id_prefix must not hold CR or LF")
    return batches


def _check_columns(schema: pa.Schema, subject: str | None, what: str) -> None:
    """Refuse a table that cannot be sent as asked, before anything is sent."""
    names = schema.names
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        raise ValueError(f"{what}: unknown columns {unknown}; it takes {list(COLUMNS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a column name appears twice: {names}")
    if "data" not in names:
        raise ValueError(f"{what}: the table has no 'data' column")
    if subject is None and "subject" not in names:
        raise ValueError(f"{what}: give subject= or a 'subject' column")
    texts = (pa.string(), pa.large_string())
    wanted = {
        "data": (*texts, pa.binary(), pa.large_binary()),
        "subject": texts,
        "msgId": texts,
    }
    for name, types in wanted.items():
        if name in names and schema.field(name).type not in types:
            raise TypeError(
                f"{what}: column {name!r} is {schema.field(name).type}, "
                f"not one of {[str(t) for t in types]}"
            )
    if "headers" in names and not _is_header_map(schema.field("headers").type):
        raise TypeError(
            f"{what}: column 'headers' is {schema.field('headers').type}, not a "
            "map<string, string> or map<string, list<string>>"
        )


def _is_header_map(kind: pa.DataType) -> bool:
    if not pa.types.is_map(kind) or not pa.types.is_string(kind.key_type):
        return False
    item = kind.item_type
    return bool(
        pa.types.is_string(item) or (pa.types.is_list(item) and pa.types.is_string(item.value_type))
    )


class RowColumns:
    """One record batch's columns as the batch encoder reads them.

    Attributes:
        rows: the number of rows.
        payloads, subjects, msg_ids, headers: the encoder's columns (None: absent).
        bad_header: the first row whose headers cannot be sent, or -1.
        why: what is wrong with that row's headers.

    Args:
        batch: the record batch (its columns checked by :func:`record_batches`).
        default_subject: the subject of rows without one, or None.
        added_headers: headers every row gets too, unless it has one of the same name.
        derives_ids: whether a row without a ``msgId`` gets a derived id (dedupe on).
            A row that gets an id, its own or a derived one, carries only that one: a
            ``Nats-Msg-Id`` in its headers (say one a read of another stream gave) is
            left out, as nats.go's ``WithMsgID`` sets the header.
    """

    __slots__ = (
        "_default", "_subject_array", "bad_header", "headers", "msg_ids", "payloads", "rows",
        "subjects", "why",
    )  # fmt: skip

    def __init__(
        self,
        batch: pa.RecordBatch,
        default_subject: str | None,
        added_headers: Mapping[str, str] | None = None,
        derives_ids: bool = False,
    ) -> None:
        names = batch.schema.names
        self.rows = batch.num_rows
        self._default = default_subject
        self.payloads = _column(batch.column(names.index("data")))
        self._subject_array = batch.column(names.index("subject")) if "subject" in names else None
        self.subjects = None if self._subject_array is None else _column(self._subject_array)
        ids = _own_ids(batch.column(names.index("msgId"))) if "msgId" in names else None
        self.msg_ids = None if ids is None else _column(ids)
        self.headers: _protocol.BatchColumn | None = None
        self.bad_header, self.why = -1, ""
        added = dict(added_headers or {})
        if "headers" in names:
            column = batch.column(names.index("headers"))
            if derives_ids:
                own = [True] * self.rows
            else:
                own = [] if ids is None else pc.is_valid(ids).to_pylist()
            self.headers, self.bad_header, self.why = _header_column(column, added, own)
        elif added:
            block = "".join(f"{k}\0{v}\0" for k, v in added.items()).encode()
            self.headers = _column(pa.array([block] * self.rows, pa.large_binary()))

    def subject(self, row: int) -> str | None:
        """The subject row ``row`` is (or would be) sent to: its own, else the default."""
        array = self._subject_array
        return (array[row].as_py() if array is not None else None) or self._default


def _column(array: pa.Array) -> _protocol.BatchColumn:
    """A binary or string Arrow array as the protocol core's column (64-bit offsets)."""
    if array.type != pa.large_binary():
        array = array.cast(pa.large_binary())
    valid, offsets, data = array.buffers()
    return _protocol.BatchColumn(data, offsets, valid if array.null_count else None, array.offset)


def _own_ids(array: pa.Array) -> pa.Array:
    """The ``msgId`` column with each empty id made null: no id, as nats.go treats an empty
    one (the server deduplicates nothing on it), so the row gets its derived id."""
    empty = pc.equal(pc.binary_length(array), 0)
    if pc.any(empty).as_py():
        array = pc.if_else(empty, pa.scalar(None, array.type), array)
    return array


def _header_column(
    array: pa.Array, added: Mapping[str, str], own_ids: list[bool]
) -> tuple[_protocol.BatchColumn, int, str]:
    """The ``headers`` map column as ``key NUL value NUL ...`` rows, or a bad row and why.

    Args:
        array: the column.
        added: headers every row gets too, unless the row has one of the same name.
        own_ids: per row, whether it gets a message id of its own or a derived one (empty:
            none does). Such a row's ``Nats-Msg-Id`` headers are left out.

    Returns:
        ``(column, -1, "")``, or ``(column, row, reason)`` for the first row
        whose headers cannot be sent (a null value, a NUL byte).
    """
    rows: list[bytes | None] = []
    for index, pairs in enumerate(array.to_pylist()):
        if pairs is None and not added:
            rows.append(None)
            continue
        pairs = list(pairs or ())
        if own_ids and own_ids[index]:
            pairs = [(key, value) for key, value in pairs if key != MSG_ID]
        named = {key for key, _ in pairs}
        pairs += [(key, value) for key, value in added.items() if key not in named]
        flat: list[str] = []
        for key, value in pairs:
            values = [value] if isinstance(value, str) else value
            if values is None or any(v is None for v in values):
                return _column(pa.array(rows, pa.large_binary())), index, f"header {key!r} is null"
            for v in values:
                flat += (key, v)
        text = "\0".join(flat)
        if text.count("\0") != max(len(flat) - 1, 0):
            return _column(pa.array(rows, pa.large_binary())), index, "a header holds a NUL byte"
        rows.append((text + "\0").encode("utf-8", "surrogateescape") if flat else b"")
    return _column(pa.array(rows, pa.large_binary())), -1, ""
