"""Every default value of the public API, in one place.

Signatures use these names instead of literals, so a default is changed
here once and the docs (``docs/connecting.md``, ``docs/consuming.md``) can be
checked against one list. Durations are float seconds, sizes bytes.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

# -- connect(): the connection ----------------------------------------------------
SERVER_URL = "nats://127.0.0.1:4222"
CONNECT_TIMEOUT = 2.0
MAX_RECONNECT_ATTEMPTS = 60
RECONNECT_TIME_WAIT = 2.0
RECONNECT_JITTER = 0.1
RECONNECT_BUF_SIZE = 8 * MIB
PING_INTERVAL = 120.0
MAX_OUTSTANDING_PINGS = 2
INBOX_PREFIX = "_INBOX"
PENDING_MSGS_LIMIT = 512 * KIB
PENDING_BYTES_LIMIT = 256 * MIB
MAX_CONTROL_LINE = 4 * KIB  # the server's default; its INFO may announce another

# -- Client calls -----------------------------------------------------------------
REQUEST_TIMEOUT = 1.0
NEXT_MSG_TIMEOUT = 1.0
NEXT_MSGS_MAX = 1000
FLUSH_TIMEOUT = 10.0
DRAIN_TIMEOUT = 30.0

# -- jetstream(): the context -----------------------------------------------------
JS_TIMEOUT = 5.0  # every JetStream API call, and ack_sync
MAX_ACK_INFLIGHT = 5000
ACK_TIMEOUT = 30.0  # an async publish's ack

# -- pulling ----------------------------------------------------------------------
FETCH_BATCH = 1
FETCH_TIMEOUT = 5.0
MESSAGES_MAX = 500  # messages() / consume(): messages kept requested
MESSAGES_EXPIRES = 30.0  # each pull request's life
MESSAGES_MAX_HEARTBEAT = 30.0  # default heartbeat: half of expires, at most this
CONSUME_JOIN_TIMEOUT = 30.0  # ConsumeContext.stop() / drain()

# -- push consumers (the nats.py compat subscribe) ---------------------------------
PUSH_IDLE_HEARTBEAT = 5.0  # asked for with flow control or an ordered push consumer

# -- streams and publishing --------------------------------------------------------
GET_MSGS_BATCH = 100  # stream.get_msgs()
PUBLISH_RETRY_ATTEMPTS = 2  # js.publish() retries on no responders
