"""The NATS protocol core: parser and encoders, in C or in pure Python.

The environment variable ``JETSTREAM_SYNC_IMPL`` picks the implementation
when this package is first imported:

- unset (or empty): the C core if ``jetstream_sync._ffi`` imports, else Python;
- ``c``: the C core, and ImportError when it is not built;
- ``python``: the pure-Python twin.

:data:`IMPL` (also ``__impl__``) says which one was chosen; every other name
comes from the chosen module (see :mod:`._py` for the documentation;
``decode_direct_batch`` is :mod:`._c`'s or, in Python, :mod:`._direct_batch`'s).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = [
    "ACK_NEW",
    "ACK_OTHER",
    "ACK_SAME",
    "BATCH_ERRORS",
    "IMPL",
    "MAX_CONTROL_LINE",
    "MAX_PAYLOAD",
    "OP_ERR",
    "OP_FIELDS",
    "OP_HMSG",
    "OP_INFO",
    "OP_MSG",
    "OP_OK",
    "OP_PING",
    "OP_PONG",
    "AckBatch",
    "BatchColumn",
    "encode_batch_hpub",
    "decode_direct_batch",
    "encode_headers",
    "encode_hpub",
    "encode_hpub_pairs",
    "encode_pub",
    "last_round_trip",
    "parse",
    "parse_direct_meta",
    "parse_headers",
    "parse_puback",
    "puback_batch",
    "round_trip",
    "send_nowait",
    "send_report",
    "valid_subject",
]

ENV_VAR = "JETSTREAM_SYNC_IMPL"
CHOICES = ("c", "python")


def select(choice: str | None) -> ModuleType:
    """Return the implementation module for a ``JETSTREAM_SYNC_IMPL`` value.

    Args:
        choice: ``"c"``, ``"python"``, or None/``""`` for "C when built, else Python".

    Returns:
        :mod:`._c` or :mod:`._py`.

    Raises:
        ImportError: ``choice`` is ``"c"`` and the C extension cannot be
            imported, or ``choice`` is not one of the allowed values.
    """
    if choice == "python":
        return importlib.import_module("._py", __name__)
    if choice == "c":
        try:
            importlib.import_module("jetstream_sync._ffi")
        except ImportError as exc:
            raise ImportError(
                f"{ENV_VAR}=c but the C extension jetstream_sync._ffi cannot be imported "
                f"({exc}); build it with `pip install -e .` or "
                "`python setup.py build_ext --inplace`, or set "
                f"{ENV_VAR}=python"
            ) from exc
        return importlib.import_module("._c", __name__)
    if choice:
        raise ImportError(f"{ENV_VAR}={choice!r} is not one of {', '.join(CHOICES)} (or unset)")
    try:
        importlib.import_module("jetstream_sync._ffi")
    except ImportError:
        return importlib.import_module("._py", __name__)
    return importlib.import_module("._c", __name__)


_impl = select(os.environ.get(ENV_VAR))

IMPL: str = _impl.IMPL

if TYPE_CHECKING:  # both implementations have the Python twin's interface
    from jetstream_sync._protocol._direct_batch import decode_direct_batch
    from jetstream_sync._protocol._py import (
        ACK_NEW,
        ACK_OTHER,
        ACK_SAME,
        BATCH_ERRORS,
        MAX_CONTROL_LINE,
        MAX_PAYLOAD,
        OP_ERR,
        OP_FIELDS,
        OP_HMSG,
        OP_INFO,
        OP_MSG,
        OP_OK,
        OP_PING,
        OP_PONG,
        AckBatch,
        BatchColumn,
        encode_batch_hpub,
        encode_headers,
        encode_hpub,
        encode_hpub_pairs,
        encode_pub,
        last_round_trip,
        parse,
        parse_direct_meta,
        parse_headers,
        parse_puback,
        puback_batch,
        round_trip,
        send_nowait,
        send_report,
        valid_subject,
    )
else:
    MAX_CONTROL_LINE = _impl.MAX_CONTROL_LINE
    MAX_PAYLOAD = _impl.MAX_PAYLOAD
    OP_MSG = _impl.OP_MSG
    OP_HMSG = _impl.OP_HMSG
    OP_PING = _impl.OP_PING
    OP_PONG = _impl.OP_PONG
    OP_OK = _impl.OP_OK
    OP_ERR = _impl.OP_ERR
    OP_INFO = _impl.OP_INFO
    OP_FIELDS = _impl.OP_FIELDS
    parse = _impl.parse
    parse_headers = _impl.parse_headers
    parse_direct_meta = _impl.parse_direct_meta
    parse_puback = _impl.parse_puback
    puback_batch = _impl.puback_batch
    AckBatch = _impl.AckBatch
    ACK_SAME = _impl.ACK_SAME
    ACK_NEW = _impl.ACK_NEW
    ACK_OTHER = _impl.ACK_OTHER
    round_trip = _impl.round_trip
    last_round_trip = _impl.last_round_trip
    send_nowait = _impl.send_nowait
    send_report = _impl.send_report
    encode_headers = _impl.encode_headers
    encode_pub = _impl.encode_pub
    encode_hpub = _impl.encode_hpub
    encode_hpub_pairs = _impl.encode_hpub_pairs
    valid_subject = _impl.valid_subject
    BATCH_ERRORS = _impl.BATCH_ERRORS
    BatchColumn = _impl.BatchColumn
    encode_batch_hpub = _impl.encode_batch_hpub
    if IMPL == "c":
        decode_direct_batch = _impl.decode_direct_batch
    else:
        from jetstream_sync._protocol._direct_batch import decode_direct_batch
__impl__ = IMPL
