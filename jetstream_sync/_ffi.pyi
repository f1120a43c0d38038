"""Types of the cffi-built C core ``jetstream_sync._ffi`` (see csrc/jss_proto.h).

cffi generates the module with no type information; this stub declares the
part of ``ffi`` and ``lib`` that jetstream_sync uses. C arrays are given
distinct types by element (``int64_t[]`` and ``char[]``), so that
``ffi.new`` and ``ffi.unpack`` say what they return. The classes exist only
here: import them under ``TYPE_CHECKING``.
"""

from types import TracebackType
from typing import Literal, overload

from _typeshed import ReadableBuffer

class CData:
    """Any cffi C value (an array, a pointer to a buffer...)."""

    def __len__(self) -> int: ...

class Int64Array(CData):
    """An ``int64_t[]`` array made by ``ffi.new``."""

    def __getitem__(self, index: int) -> int: ...
    def __setitem__(self, index: int, value: int) -> None: ...
    def __add__(self, offset: int) -> Int64Array: ...

class Int32Array(CData):
    """An ``int32_t[]`` array made by an allocator."""

    def __getitem__(self, index: int) -> int: ...

class Uint8Array(CData):
    """A ``uint8_t[]`` array made by ``ffi.new``."""

    def __getitem__(self, index: int) -> int: ...

class CharArray(CData):
    """A ``char[]`` array made by ``ffi.new`` or an allocator."""

class BatchColumnStruct(CData):
    """A ``jss_batch_column *`` made by ``ffi.new``: pointers into Arrow buffers."""

    data: CData
    offsets: CData
    valid: CData
    first: int

class BufferView(CData):
    """A ``char[]`` over a Python buffer (``ffi.from_buffer``); releases it on exit."""

    def __enter__(self) -> BufferView: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

class CBuffer:
    """``ffi.buffer``: the bytes of a C array as a Python buffer."""

    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> bytes: ...

class Allocator:
    """What ``ffi.new_allocator`` returns: ``ffi.new`` with other settings."""

    @overload
    def __call__(self, cdecl: Literal["char[]"], init: int, /) -> CharArray: ...
    @overload
    def __call__(self, cdecl: Literal["int64_t[]"], init: int, /) -> Int64Array: ...
    @overload
    def __call__(self, cdecl: Literal["int32_t[]"], init: int, /) -> Int32Array: ...

class FFI:
    """The module's ``ffi`` object, reduced to the calls jetstream_sync makes."""

    @overload
    def new(self, cdecl: Literal["int64_t[]"], init: int) -> Int64Array: ...
    @overload
    def new(self, cdecl: Literal["char[]"], init: int) -> CharArray: ...
    @overload
    def new(self, cdecl: Literal["uint8_t[]"], init: int) -> Uint8Array: ...
    @overload
    def new(self, cdecl: Literal["jss_batch_column *"]) -> BatchColumnStruct: ...
    def new_allocator(self, *, should_clear_after_alloc: bool = ...) -> Allocator: ...
    @overload
    def unpack(self, cdata: Int64Array, length: int) -> list[int]: ...
    @overload
    def unpack(self, cdata: CharArray, length: int) -> bytes: ...
    def buffer(self, cdata: CData, size: int = ...) -> CBuffer: ...
    def from_buffer(self, python_buffer: ReadableBuffer, /) -> BufferView: ...
    def cast(self, cdecl: str, value: CData | int, /) -> CData: ...
    NULL: CData

class Lib:
    """The C functions and constants of csrc/jss_proto.h."""

    JSS_OP_MSG: int
    JSS_OP_HMSG: int
    JSS_OP_PING: int
    JSS_OP_PONG: int
    JSS_OP_OK: int
    JSS_OP_ERR: int
    JSS_OP_INFO: int
    JSS_OP_FIELDS: int
    JSS_HDR_FIELDS: int
    JSS_HDR_META_FIELDS: int
    JSS_STATE_FIELDS: int
    JSS_PUBACK_FIELDS: int
    JSS_DIRECT_META_FIELDS: int
    JSS_MAX_PAYLOAD: int
    JSS_MAX_CONTROL_LINE: int
    JSS_MIN_HEADER_BLOCK: int
    JSS_ERR_RANGE: int
    JSS_ERR_OP: int
    JSS_ERR_LINE_TOO_LONG: int
    JSS_ERR_BARE_LF: int
    JSS_ERR_STRAY_CR: int
    JSS_ERR_ARGS: int
    JSS_ERR_NUMBER: int
    JSS_ERR_SIZE: int
    JSS_ERR_HDR_SIZE: int
    JSS_ERR_PAYLOAD_END: int
    JSS_ERR_HDR_PREFIX: int
    JSS_ERR_HDR_END: int
    JSS_ERR_HDR_STATUS: int
    JSS_ERR_HDR_LINE: int
    JSS_ERR_HDR_KEY: int
    JSS_ERR_HDR_CRLF: int
    JSS_ENC_ERR_KEY: int
    JSS_ENC_ERR_VALUE: int
    JSS_ENC_ERR_KV: int
    JSS_ENC_MIN_SIZE: int
    JSS_BATCH_ERR_NULL_DATA: int
    JSS_BATCH_ERR_NO_SUBJECT: int
    JSS_BATCH_ERR_SUBJECT: int
    JSS_BATCH_ERR_MSG_ID: int
    JSS_BATCH_ERR_TOO_BIG: int
    JSS_BATCH_STATE_FIELDS: int
    JSS_DIRECT_BATCH_MSG: int
    JSS_DIRECT_BATCH_MSG_HEADERS: int
    JSS_DIRECT_BATCH_STATE_FIELDS: int
    JSS_DIRECT_BATCH_ERR_MISSING: int
    JSS_DIRECT_BATCH_ERR_SEQUENCE: int
    JSS_DIRECT_BATCH_ERR_TIME: int
    JSS_DIRECT_BATCH_ERR_UNIT: int
    JSS_DIRECT_BATCH_ERR_SPACE: int
    JSS_ACK_SAME: int
    JSS_ACK_NEW: int
    JSS_ACK_OTHER: int
    JSS_ACK_SPECIAL_FIELDS: int
    JSS_ACK_STATE_FIELDS: int
    JSS_RT_REPLY: int
    JSS_RT_OTHER: int
    JSS_RT_IDLE: int
    JSS_RT_INTERRUPTED: int
    JSS_RT_EOF: int
    JSS_RT_RECV_ERROR: int
    JSS_RT_RECEIVED: int
    JSS_RT_CONSUMED: int
    JSS_RT_NEED: int
    JSS_RT_ERRNO: int
    JSS_RT_PUBACK_OK: int
    JSS_RT_OP: int
    JSS_RT_PUBACK: int
    JSS_RT_FIELDS: int
    JSS_DECODE_NONE: int
    JSS_DECODE_PUBACK: int
    JSS_SEND_SENT: int
    JSS_SEND_ERRNO: int
    JSS_SEND_FIELDS: int

    def jss_parse(
        self,
        buf: BufferView,
        start: int,
        end: int,
        ops: Int64Array,
        max_ops: int,
        state: Int64Array,
        /,
    ) -> int: ...
    def jss_parse_headers(
        self, block: bytes, len: int, pairs: Int64Array, max_pairs: int, meta: Int64Array, /
    ) -> int: ...
    def jss_valid_subject(self, subject: bytes, len: int, wildcards: int, /) -> int: ...
    def jss_parse_puback(self, data: bytes, len: int, out: Int64Array, /) -> int: ...
    def jss_direct_meta_parse(self, block: bytes, len: int, out: Int64Array, /) -> int: ...
    def jss_encode_hpub(
        self,
        out: CharArray,
        cap: int,
        subject: bytes,
        slen: int,
        reply: bytes,
        rlen: int,
        kv: bytes,
        kvlen: int,
        payload: bytes,
        plen: int,
        /,
    ) -> int: ...
    def jss_encode_headers(self, out: CharArray, cap: int, kv: bytes, kvlen: int, /) -> int: ...
    def jss_encode_batch_hpub(
        self,
        out: CData,
        cap: int,
        state: Int64Array,
        payloads: CData,
        subjects: CData,
        msg_ids: CData,
        headers: CData,
        start: int,
        end: int,
        default_subject: bytes,
        dslen: int,
        id_prefix: bytes | CData,  # NULL: derive no ids
        iplen: int,
        first_index: int,
        reply_prefix: bytes,
        rplen: int,
        first_token: int,
        reply_suffix: bytes,
        rslen: int,
        max_payload: int,
        line_room: int,
        /,
    ) -> int: ...
    def jss_direct_batch_decode(
        self,
        blocks: bytes,
        len: int,
        max_blocks: int,
        unit_ns: int,
        kinds: Int32Array,
        seqs: Int64Array,
        times: Int64Array,
        subj_offsets: Int32Array,
        subjects: CharArray,
        subjects_cap: int,
        state: Int64Array,
        /,
    ) -> int: ...
    def jss_puback_batch(
        self,
        buf: BufferView,
        start: int,
        end: int,
        sid: int,
        prefix_len: int,
        max_acks: int,
        tokens: Int64Array,
        seqs: Int64Array,
        kinds: Uint8Array,
        specials: Int64Array,
        state: Int64Array,
        /,
    ) -> int: ...
    def jss_round_trip(
        self,
        fd: int,
        buf: BufferView,
        have: int,
        cap: int,
        reply: bytes,
        rlen: int,
        timeout_ms: int,
        decode: int,
        out: Int64Array,
        /,
    ) -> int: ...
    def jss_send_nowait(self, fd: int, data: BufferView, len: int, out: Int64Array, /) -> int: ...

ffi: FFI
lib: Lib
