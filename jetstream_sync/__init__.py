"""jetstream_sync: a blocking, thread-safe NATS and JetStream client with a C protocol core.

Connect with :func:`connect`; every call blocks and takes a timeout in seconds.
``__impl__`` says which protocol core is in use: ``"c"`` or ``"python"``.
"""

from ._protocol import IMPL as __impl__
from .client import Client, ClientStats, connect
from .errors import (
    APIError,
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    ForkedClientError,
    JetStreamError,
    JetStreamNotEnabledError,
    MaxPayloadError,
    MessageNotFoundError,
    MsgAlreadyAckedError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
    NoServersError,
    NotJetStreamMsgError,
    ProtocolError,
    SlowConsumerError,
    StreamNameInUseError,
    StreamNotFoundError,
    StreamWrongExpectedError,
    TimeoutError,
    TooManyPendingAcksError,
    WrongLastMsgIdError,
    WrongLastSequenceError,
)
from .headers import Headers
from .msg import Msg
from .subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "Client",
    "ClientStats",
    "ConnectionClosedError",
    "ConnectionLostError",
    "ConsumerDeletedError",
    "ConsumerNotFoundError",
    "ForkedClientError",
    "Headers",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "MaxPayloadError",
    "MessageNotFoundError",
    "Msg",
    "MsgAlreadyAckedError",
    "NatsError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NotJetStreamMsgError",
    "ProtocolError",
    "SlowConsumerError",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "StreamWrongExpectedError",
    "Subscription",
    "TimeoutError",
    "TooManyPendingAcksError",
    "WrongLastMsgIdError",
    "WrongLastSequenceError",
    "__impl__",
    "__version__",
    "connect",
]
