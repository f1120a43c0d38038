"""The Key-Value scenarios' bucket: made and filled over a raw connection.

``KVwatch`` needs a bucket of ``n`` distinct keys before the client starts; every
client then watches the same data. The raw limit driver makes its ``KVput``/``KVget``
bucket with :func:`create_bucket` too.
"""

from __future__ import annotations

from . import WINDOW
from ._wire import REPLY, RawConn

BUCKET = "BENCH"
KV_STREAM = "KV_" + BUCKET
KEYS = 1000  # distinct keys the put/get scenarios cycle through

# ADR-8's stream for a bucket with history 1 (what every client creates).
BUCKET_CONFIG = {
    "name": KV_STREAM,
    "subjects": [f"$KV.{BUCKET}.>"],
    "max_msgs_per_subject": 1,
    "max_msgs": -1,
    "max_bytes": -1,
    "max_age": 0,
    "max_msg_size": -1,
    "max_consumers": -1,
    "storage": "file",
    "discard": "new",
    "num_replicas": 1,
    "duplicate_window": 120_000_000_000,
    "allow_rollup_hdrs": True,
    "deny_delete": True,
    "allow_direct": True,
}


def key_subject(i: int) -> bytes:
    """The subject of key ``k<i>`` in the bucket."""
    return b"$KV.%s.k%d" % (BUCKET.encode(), i)


def create_bucket(conn: RawConn) -> None:
    """Create the bucket's stream (already there with this config is fine)."""
    conn.api(f"$JS.API.STREAM.CREATE.{KV_STREAM}", BUCKET_CONFIG)


def prefill_kv(port: int, n: int, size: int = 128) -> int:
    """Create the bucket and put ``n`` distinct keys, pipelined; return the acks counted."""
    conn = RawConn(port)
    try:
        create_bucket(conn)
        payload = b"x" * size
        sent = acked = 0
        while sent < n:
            k = min(1000, n - sent)
            conn.send(b"".join(
                b"PUB %s %s %d\r\n%s\r\n" % (key_subject(i), REPLY, size, payload)
                for i in range(sent, sent + k)
            ))  # fmt: skip
            sent += k
            while sent - acked > WINDOW or (sent == n and acked < n):
                acked += conn.pump()
    finally:
        conn.close()
    return acked
