"""Every exception jetstream_sync raises.

The tree is rooted at :class:`NatsError`. Errors that mean "your input is
wrong" also derive from :class:`ValueError`; :class:`TimeoutError` also
derives from the builtin ``TimeoutError`` so ``except TimeoutError`` works
with or without importing this module.

JetStream API errors are :class:`APIError` subclasses chosen by the server's
``err_code`` (see :func:`api_error`); register a new one by subclassing with
``class MyError(APIError, err_code=12345)``.
"""

from __future__ import annotations

import builtins
import functools
import re
from collections.abc import Callable
from typing import Any, ClassVar, Self


class NatsError(Exception):
    """Base class of every error raised by jetstream_sync.

    An error's ``args`` are the arguments of its constructor, so
    ``type(exc)(*exc.args)`` makes it again: that is how Celery's JSON result
    backend (its default) rebuilds an error a task raised. Its text is kept
    apart from them.
    """

    def __str__(self) -> str:
        text = self.__dict__.get("_text")
        return super().__str__() if text is None else str(text)

    def _keep_args(self, *args: object) -> None:
        """Make ``args`` the constructor's arguments; the text given to ``__init__`` stays."""
        self._text = str(self)
        self.args = args


class ProtocolError(NatsError):
    """The server sent bytes that are not valid NATS protocol.

    Attributes:
        offset: where the frame in error starts in the bytes parsed, when the
            error is about one frame (else None). The whole frames before it
            are delivered before the error ends the connection.
    """

    offset: int | None = None


class ConnectionClosedError(NatsError):
    """The client is closed (or was closed while the call waited)."""


class ConnectionLostError(NatsError):
    """The connection broke while the call waited (the client may reconnect).

    Raised at once to every request, JetStream publish or API call then waiting
    for its reply, and to every pending ``publish_async`` future: the reply was
    addressed to the lost connection and cannot come. The request may or may
    not have been processed by the server; retry it (republish with the same
    ``msg_id`` so the stream stores the message once).
    """


class ReconnectBufferFullError(NatsError):
    """A write while reconnecting found the reconnect buffer (``reconnect_buf_size``) full."""


class NoServersError(NatsError):
    """No server in the pool could be reached."""


class AuthorizationError(NatsError):
    """The server rejected the credentials or a permission check."""


class PermissionViolationError(AuthorizationError):
    """The server refused one publish or subscription (``-ERR 'Permissions Violation ...'``).

    Reported to ``error_cb``; the connection stays up. A refused
    subscription ends: its ``next_msg()`` and iteration raise this error.

    Attributes:
        operation: ``"publish"`` or ``"subscription"`` (``""`` if the text says neither).
        subject: the refused subject (``""`` if the text names none).
        queue: the queue group of a refused subscription, or ``""``.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.text = text
        match = _PERMISSION.search(text)
        self.operation = match["op"].lower() if match else ""
        self.subject = match["subject"] if match else ""
        queue = _QUEUE.search(text)
        self.queue = queue["queue"] if queue else ""


_PERMISSION = re.compile(r"(?P<op>publish|subscription) to \"?(?P<subject>[^\"\s]+)", re.I)
_QUEUE = re.compile(r"using queue \"?(?P<queue>[^\"\s]+)", re.I)


class StaleConnectionError(NatsError):
    """The connection went stale: PINGs went unanswered, or the server said so
    (``-ERR 'Stale Connection'``). The client reconnects on its own."""


class MaxConnectionsExceededError(NatsError):
    """The server (or the account) has all the connections it accepts
    (``-ERR 'Maximum Connections Exceeded'``). The client keeps trying."""


class MaxSubscriptionsExceededError(NatsError):
    """The account or user has all the subscriptions it may have
    (``-ERR 'Maximum Subscriptions Exceeded'``); the connection stays up."""


class ServerError(NatsError):
    """A ``-ERR`` from the server that no narrower class stands for.

    Attributes:
        text: the server's words.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(f"server error: {text}")
        self.text = text
        self._keep_args(text)

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return (type(self), (self.text,))


class TimeoutError(NatsError, builtins.TimeoutError):  # noqa: A001 - the contract's name
    """A blocking call did not get its answer before its timeout."""


class WriteBufferTimeoutError(TimeoutError):
    """No room in the write buffer before the timeout: nothing of the call was sent.

    More than the buffer holds waits for a server that reads nothing (frozen, or
    behind a stalled link). Unlike other timeouts, the server got nothing: an
    ``ack_sync`` that raises it leaves the message unacked, and a publish stored
    nothing.
    """


class NoRespondersError(NatsError):
    """A request found no subscriber on its subject (status 503).

    For a JetStream ``publish``: no stream captures the subject.

    Attributes:
        subject: the subject nobody answered on (``""`` when not known).
    """

    def __init__(self, text: str = "", subject: str = "") -> None:
        super().__init__(text)
        self.subject = subject
        self._keep_args(text, subject)

    def __reduce__(self) -> tuple[type[Self], tuple[str, str]]:
        return (type(self), (str(self), self.subject))


class MaxPayloadError(NatsError, ValueError):
    """A payload is larger than the server's ``max_payload``."""


class LimitExceededError(NatsError, ValueError):
    """An argument is longer than a server limit allows; raised before anything is sent.

    Checked where input enters (a subject, a reply subject, a Key-Value key, an
    object name, a stream or consumer name, a header block), so that one bad
    call never makes the server drop the connection other threads share.

    Attributes:
        argument: the argument, as the call names it (``"subject"``, ``"key"``...).
        length: its length in bytes, or that of the protocol line it would make.
        limit: the limit it passes (``max_control_line`` from the server's INFO,
            4,096 bytes by default, or ``max_payload``).
    """

    def __init__(self, argument: str, length: int, limit: int, detail: str = "") -> None:
        text = f"{argument} is too long: {length} bytes, the server's limit is {limit}"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.argument = argument
        self.length = length
        self.limit = limit
        self.detail = detail
        self._keep_args(argument, length, limit, detail)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int, int, str]]:
        return (type(self), (self.argument, self.length, self.limit, self.detail))


class BadSubjectError(NatsError, ValueError):
    """A subject (or queue group, or reply subject) is not valid."""


class BadHeaderError(NatsError, ValueError):
    """A header key or value cannot be sent without corrupting the frame."""


class SlowConsumerError(NatsError):
    """A subscription's pending queue is full; the message was not queued.

    Reported to ``error_cb`` with the subscription's ``sid`` and ``subject``.
    """

    def __init__(self, subject: str = "", sid: int = 0) -> None:
        super().__init__(f"slow consumer on {subject!r} (sid {sid}): pending limits reached")
        self.subject = subject
        self.sid = sid
        self._keep_args(subject, sid)

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), (self.subject, self.sid))


class ServerSlowConsumerError(SlowConsumerError):
    """The server dropped the connection because the client read too slowly
    (``-ERR 'Slow Consumer'``). The client reconnects on its own."""

    def __init__(self, text: str = "Slow Consumer") -> None:
        NatsError.__init__(self, f"the server found this client too slow to read: {text}")
        self.subject = ""
        self.sid = 0
        self.text = text
        self._keep_args(text)

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return (type(self), (self.text,))


class ServerStartError(NatsError, RuntimeError):
    """A local nats-server (``jetstream_sync.testing.NatsServer``, ``jetstream-sync server``)
    did not come up in time; the message carries the tail of its log."""


class ForkedClientError(NatsError):
    """A client created in a parent process was used in a forked child."""


class WaitModeError(NatsError, RuntimeError):
    """``connect()`` refused a wait mode that cannot work in this process.

    For example ``wait="threads"`` after gevent or eventlet patched the
    standard library, or a monkey-patch that left ``socket``, ``select`` or
    ``threading`` unpatched; the message names the mode and the fix (see
    ``docs/app-servers.md``).
    """


class InlineCallbackError(NatsError, RuntimeError):
    """An inline callback (``subscribe(..., inline=True)``) made a call that waits for
    what the connection reads: a request, a flush, a drain, ``next_msg`` or a fetch.

    The callback runs on the thread that reads the connection, so that wait could only
    end at its timeout. Publish from the callback (``msg.respond()``, ``publish``,
    ``msg.ack()``), or hand the work to a thread of your own.

    Also raised by ``PubAckFuture.result()`` / ``exception()`` called from a
    done-callback on the ack thread before that future resolved: the ack thread
    settles it, so the wait could only time out as well.
    """


class JetStreamError(NatsError):
    """Base class of JetStream errors."""


class APIError(JetStreamError):
    """An error returned by the JetStream API.

    The text keeps the server's description and codes, and names what the
    request was about: ``stream not found: stream 'ORDERS' (code=404,
    err_code=10059)``.

    Attributes:
        code: the HTTP-like status code (e.g. 404).
        err_code: the server's JetStream error code (e.g. 10059).
        description: the server's text.
        stream: the stream the request was about, or None.
        consumer: the consumer the request was about, or None.
        seq: the stream sequence the request was about, or None.
        subject: the subject the request was about (a message's, or the
            subject of a publish), or None.
    """

    _registry: ClassVar[dict[int, type[APIError]]] = {}
    # status code -> class, for replies that carry a status and no err_code (direct gets)
    _status_registry: ClassVar[dict[int, type[APIError]]] = {}
    err_code_default: ClassVar[int | None] = None

    def __init_subclass__(
        cls,
        err_code: int | tuple[int, ...] | None = None,
        status: int | None = None,
        **kw: Any,
    ) -> None:
        super().__init_subclass__(**kw)
        codes = err_code if isinstance(err_code, tuple) else (err_code,)
        for code in codes:
            if code is not None:
                APIError._registry[code] = cls
        if err_code is not None:
            cls.err_code_default = codes[0]
        if status is not None:
            APIError._status_registry[status] = cls

    def __init__(
        self,
        code: int = 0,
        err_code: int = 0,
        description: str = "",
        stream: str | None = None,
        consumer: str | None = None,
        seq: int | None = None,
        subject: str | None = None,
    ) -> None:
        named = _named(stream=stream, consumer=consumer, seq=seq, subject=subject)
        text = f"{description}: {named}" if named else description
        super().__init__(f"{text} (code={code}, err_code={err_code})")
        self.code = code
        self.err_code = err_code
        self.description = description
        self.stream = stream
        self.consumer = consumer
        self.seq = seq
        self.subject = subject
        about = (stream, consumer, seq, subject)
        named_args = about[: max((i + 1 for i, v in enumerate(about) if v is not None), default=0)]
        self._keep_args(code, err_code, description, *named_args)

    def __reduce__(self) -> tuple[Callable[..., Self], tuple[int, int, str]]:
        about: dict[str, Any] = {"stream": self.stream, "consumer": self.consumer}
        about.update(seq=self.seq, subject=self.subject)
        if any(value is not None for value in about.values()):
            return (functools.partial(type(self), **about), self._codes())
        return (type(self), self._codes())

    def _codes(self) -> tuple[int, int, str]:
        return (self.code, self.err_code, self.description)


def _named(**about: object) -> str:
    """``stream 'S', seq 5``: what an API error is about, for its text."""
    return ", ".join(f"{key} {value!r}" for key, value in about.items() if value is not None)


def api_error(
    code: int,
    err_code: int,
    description: str,
    *,
    stream: str | None = None,
    consumer: str | None = None,
    seq: int | None = None,
    subject: str | None = None,
) -> APIError:
    """Build the most specific :class:`APIError` subclass for ``err_code``.

    A reply without an ``err_code`` (a direct get's status) is typed by its ``code``
    when a class is registered for it (``class X(APIError, status=413)``).

    Args:
        code: the HTTP-like status code.
        err_code: the server's JetStream error code; picks the class.
        description: the server's text.
        stream: the stream the request was about.
        consumer: the consumer the request was about.
        seq: the stream sequence the request was about.
        subject: the subject the request was about.
    """
    if err_code:
        cls = APIError._registry.get(err_code, APIError)
    else:
        cls = APIError._status_registry.get(code, APIError)
    return cls(
        code, err_code, description, stream=stream, consumer=consumer, seq=seq, subject=subject
    )


class JetStreamNotEnabledError(APIError, err_code=(10076, 10039)):
    """JetStream is not enabled on the server or for the account."""


class StreamNotFoundError(APIError, err_code=10059):
    """The stream does not exist."""


class StreamSealedError(APIError, err_code=10109):
    """The stream is sealed (``sealed=True``, an Object Store's ``seal()``): it takes no
    more messages, deletes or purges; what it holds stays readable."""


class StreamMsgDeleteFailedError(APIError, err_code=10057):
    """The server did not delete the message: the stream has ``deny_delete``
    ("message delete not permitted") or its store failed; the description says which.

    ``Stream.delete_msg`` raises :class:`MessageNotFoundError` instead for a
    sequence with no message (the file store answers those with 10057 too).
    """


class StreamPurgeFailedError(APIError, err_code=10110):
    """The server did not purge: the stream has ``deny_purge`` ("stream purge not
    permitted") or its store failed; the description says which."""


class ReplicasNotSupportedError(APIError, err_code=10074):
    """``num_replicas`` > 1 (a stream's, a consumer's, a bucket's) asked of a server
    that is not in a cluster."""


class StreamNameInUseError(APIError, err_code=10058):
    """A stream with that name exists with a different configuration."""


class StreamSubjectOverlapError(APIError, err_code=10065):
    """The stream's subjects overlap those another stream of the account captures."""


class StreamInvalidConfigError(APIError, err_code=10052):
    """The server refused the stream config: an update it cannot make (storage,
    retention to or from work queue, unsealing) or a config it rejects (a source
    or republish cycle...); the description says which."""


class StreamSourceInvalidError(APIError, err_code=(10021, 10140, 10146, 10147)):
    """The server refused a stream's sources or mirror: an external API prefix
    that overlaps this account's own ``$JS.API`` (10021), the same source twice
    (10140), a subject transform it cannot apply (10146), or filters of one
    source that overlap (10147)."""


class StreamTransformInvalidError(APIError, err_code=10156):
    """The server refused the stream's ``subject_transform`` (its destination
    cannot be made from its source)."""


class StreamMirrorNotUpdatableError(APIError, err_code=10055):
    """An update changed the stream's mirror (a mirror may only be removed)."""


class ConsumerNotFoundError(APIError, err_code=10014):
    """The consumer does not exist."""


class MessageNotFoundError(APIError, err_code=(10037, 10043)):
    """No message matches the request (10043: no message at the sequence to delete)."""


class WrongLastSequenceError(APIError, err_code=(10071, 10164)):
    """``expected_last_seq`` / ``expected_last_subject_seq`` did not match."""


class WrongLastMsgIdError(APIError, err_code=10070):
    """``expected_last_msg_id`` did not match."""


class StreamWrongExpectedError(APIError, err_code=10060):
    """``expected_stream`` did not match the stream that stored the message."""


class DuplicateMsgIdInProcessError(APIError, err_code=10158):
    """A publish with this ``msg_id`` arrived while an earlier copy was still being stored.

    In a cluster the first copy is still being replicated. Nothing new was
    stored; republish with the same ``msg_id``: once the first copy is stored
    the retry gets its PubAck with ``duplicate=True`` (or stores the message,
    if the first copy failed after all).
    """


class StreamTooManyRequestsError(APIError, err_code=10167):
    """The stream's queue of publishes waiting to be stored is full (status 429).

    This message was not stored; republish it (with the same ``msg_id``) after a pause.
    """


class RequiredApiLevelError(APIError, err_code=10185):
    """The server's JetStream API level is lower than the request needs."""


class StreamStoreFailedError(APIError, err_code=10077):
    """The stream did not store a published message (status 503); nothing was stored.

    Most often the stream is full and discards new messages (``discard=NEW``:
    "maximum messages exceeded", "maximum bytes exceeded", "maximum messages
    per subject exceeded"); else its store failed. The description says which.
    """


class InsufficientResourcesError(APIError, err_code=(10047, 10028, 10023)):
    """The server or the account lacks the disk (10047) or memory (10028) a stream's
    limits ask for, or other JetStream resources (10023)."""


class MessageTooLargeError(APIError, err_code=10054):
    """The message is larger than the stream's ``max_msg_size``."""


class HeadersTooLargeError(APIError, err_code=10097):
    """The message's headers are longer than the 65,535 bytes a stream stores."""


class MessageTTLInvalidError(APIError, err_code=10165):
    """The ``Nats-TTL`` value is not a per-message TTL the server takes."""


class MessageTTLDisabledError(APIError, err_code=10166):
    """A message with a TTL (``ttl=``, ``Nats-TTL``) to a stream without ``allow_msg_ttl``."""


class TooManyResultsError(APIError, status=413):
    """The server refused to answer one request with that many results (status 413).

    A batched direct get of the last messages of more than 1,024 subjects gets it;
    the client's own listings page under the limit, so it reaches a caller only from
    a request the client cannot split.
    """


class NotJetStreamMsgError(JetStreamError):
    """An ack or metadata call on a message that did not come from JetStream."""


class MsgAlreadyAckedError(JetStreamError):
    """A second final acknowledgement (ack, nak, term) of the same message."""


class TooManyPendingAcksError(JetStreamError):
    """``publish_async`` found ``max_ack_inflight`` acks pending (backpressure off)."""


class ConsumerDeletedError(JetStreamError):
    """The consumer was deleted while it was being read."""


class NoHeartbeatError(JetStreamError):
    """The server's idle heartbeats stopped arriving."""


class DirectGetNotAllowedError(JetStreamError):
    """A direct get on a stream created without ``allow_direct=True``."""


class OverlappingFilterSubjectsError(APIError, err_code=10138):
    """A consumer's ``filter_subjects`` overlap one another (``a.*`` beside ``a.b``)."""


class ConsumerExistsError(APIError, err_code=10148):
    """``create_consumer`` found a consumer of that name with another config."""


class ConsumerDoesNotExistError(APIError, err_code=10149):
    """``update_consumer`` found no consumer of that name."""


class ConsumerCreateError(APIError, err_code=10012):
    """The server could not create or update the consumer (nats.go's ``ErrConsumerCreate``).

    Most often an update that changes a field that cannot change ("deliver
    policy can not be updated"); the description says why.
    """


class WorkQueueConsumerNotUniqueError(APIError, err_code=(10099, 10100)):
    """A consumer a work-queue stream cannot take beside its others.

    Each message of a work queue goes to one consumer only, so the server
    refuses a second consumer without a filter (10099) and one whose filter
    overlaps another consumer's (10100).
    """


class ConsumerNameExistsError(APIError, err_code=10013):
    """A consumer of that name already exists (older servers' refusal)."""


class MaximumConsumersLimitError(APIError, err_code=10026):
    """The stream (or the account) holds as many consumers as it may.

    Every consumer counts, the ephemeral and ordered ones behind a Key-Value
    watch or an ordered read too. nats-server 2.15 allows 1,000 per stream
    unless the stream sets a positive ``max_consumers`` or the server's
    ``jetstream { limits { default_max_consumers: N } }`` says otherwise
    (``-1``: no limit); a stream's ``max_consumers=-1`` does not lift it.
    """


class MaximumStreamsLimitError(APIError, err_code=10027):
    """The account holds as many streams as its ``max_streams`` allows.

    Key-Value and Object Store buckets are streams and count too.
    """


class PullStatusError(JetStreamError):
    """A pull request ended with a status the server sent instead of messages.

    Attributes:
        status: the status code (400, 409, 423, 503...).
        description: the server's text, e.g. ``"Exceeded MaxWaiting"``.
    """

    def __init__(self, status: int = 0, description: str = "") -> None:
        super().__init__(f"pull request failed: {status} {description}".rstrip())
        self.status = status
        self.description = description
        self._keep_args(status, description)

    def __reduce__(self) -> tuple[type[Self], tuple[int, str]]:
        return (type(self), (self.status, self.description))


class PullBadRequestError(PullStatusError):
    """400: the server rejected the pull request (bad options, wrong priority group...)."""


class PriorityGroupError(PullBadRequestError, ValueError):
    """Priority-group options (ADR-42) the consumer cannot take.

    A group the consumer does not declare, a group on a consumer without
    groups (or none on one with them), a group name outside the server's rule,
    a ``priority`` outside 0-9, or an option the consumer's policy does not
    take. Raised before sending where the client can tell (``status`` 0),
    else from the server's answer (``status`` 400). The text names the group.

    Attributes:
        group: the group the request named, or None.
    """

    def __init__(self, description: str = "", group: str | None = None, status: int = 0) -> None:
        JetStreamError.__init__(
            self, f"priority group {group!r}: {description}" if group is not None else description
        )
        self.status = status
        self.description = description
        self.group = group
        self._keep_args(description, group, status)

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        return (type(self), (self.description, self.group, self.status))


class ConsumerPushBasedError(PullStatusError):
    """409 "Consumer is push based": pull requests were sent to a push consumer."""


class PullRequestLimitError(PullStatusError):
    """409 "Exceeded Max...": the request broke a consumer limit (max_waiting,
    max_batch, max_expires, max_bytes). A warning for ``messages()``/``consume()``."""


class LeadershipChangedError(PullStatusError):
    """409 "Leadership Change": the consumer's leader moved; pending pulls were dropped."""


class ServerShutdownError(PullStatusError):
    """409 "Server Shutdown": the server holding the pull request is shutting down."""


class PinIdMismatchError(PullStatusError):
    """423: this client's pin in a PINNED_CLIENT priority group is no longer valid.

    Also 400 "Not a Pinned Client Priority consumer": the consumer's policy was changed
    since the pin was won, and the server refuses any pin id.
    """


class IteratorClosedError(JetStreamError):
    """``next()`` was called on a message iterator that was stopped."""


class OrderedConsumerResetError(JetStreamError):
    """The ordered consumer could not recreate its server-side consumer
    ``max_reset_attempts`` times in a row."""


class OrderedConsumerInUseError(JetStreamError):
    """An ordered consumer was asked to ``fetch``/``next`` or to start another
    ``messages()``/``consume()`` while one of its iterators still runs: both would
    take the same messages (nats.go's ``ErrOrderConsumerUsedAsFetch`` /
    ``ErrOrderConsumerUsedAsConsume``). Stop the iterator first."""


class NKeyError(NatsError, ValueError):
    """A malformed nkey seed or credentials file: bad encoding, checksum or key
    type, a missing block, or a file that cannot be read."""


class KeyValueError(JetStreamError):
    """Base class of Key-Value errors."""


class InvalidBucketNameError(KeyValueError, ValueError):
    """A bucket name is empty or holds characters other than ``a-z A-Z 0-9 _ -``."""


class InvalidKeyError(KeyValueError, ValueError):
    """A key (or key filter) is not valid: empty, a character outside
    ``-/_=.a-zA-Z0-9``, a leading or trailing dot, or an empty token."""


class BucketNotFoundError(KeyValueError, StreamNotFoundError):
    """The bucket (its ``KV_<bucket>`` stream) does not exist."""


class KeyNotFoundError(KeyValueError):
    """The key has no value (or the revision asked for is not this key's)."""


class KeyDeletedError(KeyNotFoundError):
    """The key's latest entry is a delete or purge marker.

    Attributes:
        entry: the marker (a ``KeyValueEntry`` with operation DEL or PURGE).
    """

    def __init__(self, message: str = "key was deleted", entry: object = None) -> None:
        super().__init__(message)
        self.entry = entry
        self._keep_args(message, entry)

    def __reduce__(self) -> tuple[type[Self], tuple[str, object]]:
        return (type(self), (str(self), self.entry))


class KeyWrongLastSequenceError(KeyValueError, WrongLastSequenceError):
    """``update``/``create``/``delete(last=...)`` found another revision than expected."""


class KeyExistsError(KeyWrongLastSequenceError):
    """``create`` found the key holding a value."""


# ---------------------------------------------------------------- Object Store


class ObjectStoreError(JetStreamError):
    """Base class of Object Store errors raised by the client itself."""


class ObjectStoreNotFoundError(StreamNotFoundError):
    """The Object Store bucket (its stream ``OBJ_<bucket>``) does not exist."""


class ObjectStoreExistsError(StreamNameInUseError):
    """An Object Store bucket of that name exists with another config."""


class InvalidObjectStoreNameError(ObjectStoreError, ValueError):
    """An Object Store bucket name is not 1 or more of ``A-Z a-z 0-9 _ -``."""


class InvalidObjectNameError(ObjectStoreError, ValueError):
    """An object name is empty or not a ``str``."""


class ObjectNotFoundError(ObjectStoreError):
    """No such object in the bucket (or it was deleted)."""


class ObjectAlreadyExistsError(ObjectStoreError):
    """The name is taken by an object that is not deleted (a rename or link target)."""


class BadObjectMetaError(ObjectStoreError):
    """An object's stored meta is not valid (not JSON, no ``nuid``, a bad digest form)."""


class DigestMismatchError(ObjectStoreError):
    """The chunks read do not hash to the SHA-256 digest the object's meta records."""


class ObjectSizeMismatchError(ObjectStoreError):
    """The chunks read do not add up to the size or chunk count the meta records."""


class ObjectReplacedError(ObjectStoreError):
    """The object was replaced while it was read: its chunks were purged under the reader.

    ``get`` and ``get_into`` read a name again when this happens before they
    handed out any byte; a reader that got part of the old version gets this
    error (a ``get_into`` writer holds the start of the old version).

    Attributes:
        written: how many bytes of the replaced version the writer got.
    """

    def __init__(self, message: str = "object was replaced", written: int = 0) -> None:
        super().__init__(message)
        self.written = written
        self._keep_args(message, written)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int]]:
        return (type(self), (str(self), self.written))


class ObjectLinkError(ObjectStoreError, ValueError):
    """A link rule was broken: a put over a link, a link to a link or to a deleted object."""


class LinkIsABucketError(ObjectLinkError):
    """A get of a link to a whole bucket (it names no object to read)."""


# ---------------------------------------------------------------- Counters (ADR-49)


class CountersNotEnabledError(APIError, err_code=10168):
    """The stream is not a counter stream (``allow_msg_counter`` is off)."""


class CounterIncrementMissingError(APIError, err_code=10169):
    """A publish to a counter stream carried no ``Nats-Incr`` header."""


class CounterPayloadError(APIError, err_code=10170):
    """A counter increment carried a body (increments must be empty)."""


class CounterIncrementInvalidError(APIError, err_code=10171):
    """The ``Nats-Incr`` value is not a signed decimal integer."""


class CounterBrokenError(APIError, ValueError, err_code=10172):
    """The stored value on the subject is not a counter value the server can add to
    (from the server, or from the client reading it: also a ``ValueError``)."""


class MirrorWithCountersError(APIError, ValueError, err_code=10173):
    """A mirror cannot be a counter stream (refused by the config check before sending,
    or by the server)."""


class CounterNotFoundError(JetStreamError, LookupError):
    """No counter value is stored on the subject (it was never incremented).

    Attributes:
        subject: the subject asked for.
    """

    def __init__(self, subject: str) -> None:
        super().__init__(f"no counter value on subject {subject!r}")
        self.subject = subject
        self._keep_args(subject)

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return (type(self), (self.subject,))


# ---------------------------------------------------------------- Schedules (ADR-51)


class SchedulesNotEnabledError(APIError, err_code=10188):
    """The stream does not accept schedules (``allow_msg_schedules`` is off)."""


class SchedulePatternInvalidError(APIError, err_code=10189):
    """The server refused the ``Nats-Schedule`` expression."""


class ScheduleTargetInvalidError(APIError, err_code=10190):
    """The schedule's target is not a subject of the same stream (or is the schedule's own)."""


class ScheduleTTLInvalidError(APIError, err_code=10191):
    """The ``Nats-Schedule-TTL`` value is not a valid per-message TTL."""


class ScheduleRollupInvalidError(APIError, err_code=10192):
    """The schedule's rollup header is not one the scheduler allows."""


class ScheduleSourceInvalidError(APIError, err_code=10203):
    """The ``Nats-Schedule-Source`` subject is not valid for this schedule."""


class ScheduleSchedulerInvalidError(APIError, err_code=10212):
    """The message carries a ``Nats-Scheduler`` header a schedule may not set."""


class ScheduleTimeZoneInvalidError(APIError, err_code=10223):
    """The server refused the ``Nats-Schedule-Time-Zone`` value."""


class NotAScheduleError(JetStreamError):
    """``cancel_schedule`` found a subject whose last message is not a schedule.

    Nothing was removed: the subject holds ordinary messages (a mistyped subject, or a
    schedule that already fired or was replaced by an ordinary message).

    Attributes:
        subject: the subject given.
        seq: the stream sequence of its last message.
    """

    def __init__(self, subject: str, seq: int = 0) -> None:
        super().__init__(
            f"the last message on {subject!r} (seq {seq}) is not a schedule; nothing was removed"
        )
        self.subject = subject
        self.seq = seq
        self._keep_args(subject, seq)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int]]:
        return (type(self), (self.subject, self.seq))


class AtomicPublishDisabledError(APIError, err_code=10174):
    """The stream does not allow atomic batches (``allow_atomic``)."""


class AtomicPublishMissingSeqError(APIError, err_code=10175):
    """A message of an atomic batch has no ``Nats-Batch-Sequence``."""


class AtomicPublishIncompleteBatchError(APIError, err_code=10176):
    """The atomic batch lost a message (a sequence is missing) and was abandoned."""


class AtomicPublishUnsupportedHeaderError(APIError, err_code=10177):
    """A header the server refuses inside an atomic batch (e.g. ``Nats-Expected-Last-Msg-Id``)."""


class AtomicPublishInvalidBatchIdError(APIError, err_code=10179):
    """The batch id is not valid (longer than 64 characters)."""


class AtomicPublishTooLargeBatchError(APIError, err_code=10199):
    """The atomic batch holds more messages than the server allows (1000 by default)."""


class AtomicPublishInvalidCommitError(APIError, err_code=10200):
    """The batch's ``Nats-Batch-Commit`` value is not one the server knows."""


class AtomicPublishDuplicateMsgIdError(APIError, err_code=10201):
    """Two messages of one atomic batch carry the same ``Nats-Msg-Id``."""


class AtomicPublishTooManyInflightError(APIError, err_code=10210):
    """The server holds too many uncommitted atomic batches; retry later."""


class BatchPublishDisabledError(APIError, err_code=10205):
    """The stream does not allow fast-ingest batches (``allow_batched``, server 2.14+)."""


class BatchPublishInvalidPatternError(APIError, err_code=10206):
    """The server did not understand a fast-ingest batch's reply subject."""


class BatchPublishInvalidBatchIdError(APIError, err_code=10207):
    """The fast-ingest batch id is not valid (longer than 64 characters)."""


class BatchPublishUnknownBatchIdError(APIError, err_code=10208):
    """The server no longer knows the fast-ingest batch (abandoned after inactivity)."""


class BatchPublishTooManyInflightError(APIError, err_code=10211):
    """The server holds too many open fast-ingest batches; retry later."""


class FastBatchError(JetStreamError):
    """A fast-ingest batch stopped at a message (see :class:`jetstream_sync.FastBatch`).

    With ``on_gap="fail"`` the server ends the batch there and keeps what it
    stored before that message; nothing after it is stored.

    Attributes:
        sequence: the batch sequence (1-based) of the message the batch stopped at.
    """

    def __init__(self, message: str, sequence: int = 0) -> None:
        super().__init__(message)
        self.sequence = sequence
        self._keep_args(message, sequence)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int]]:
        return (type(self), (str(self), self.sequence))


class FastBatchGapError(FastBatchError):
    """The server missed messages of a fast batch: ``first_lost`` up to ``sequence`` - 1.

    Attributes:
        first_lost: the first batch sequence the server did not receive.
    """

    def __init__(self, message: str, sequence: int = 0, first_lost: int = 0) -> None:
        super().__init__(message, sequence)
        self.first_lost = first_lost
        self._keep_args(message, sequence, first_lost)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int, int]]:  # type: ignore[override]
        return (type(self), (str(self), self.sequence, self.first_lost))


class FastBatchMessageError(FastBatchError):
    """The stream refused one message of a fast batch.

    Attributes:
        error: the server's error for that message (an :class:`APIError` subclass).
    """

    def __init__(self, message: str, sequence: int = 0, error: APIError | None = None) -> None:
        super().__init__(message, sequence)
        self.error = error
        self._keep_args(message, sequence, error)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int, APIError | None]]:  # type: ignore[override]
        return (type(self), (str(self), self.sequence, self.error))


class FastBatchClosedError(FastBatchError):
    """The fast batch was committed, abandoned or stopped: it takes no more messages."""


class FastBatchUnsupportedError(JetStreamError):
    """The server is older than 2.14 and has no fast-ingest batches."""


# ---------------------------------------------------------------- Spark (jetstream_sync.spark)


class DataLossError(NatsError, RuntimeError):
    """Messages a Spark read planned to read are gone, or the stream was recreated.

    Raised by a read task unless the ``failOnDataLoss`` option is ``false``
    (``docs/spark/reading.md``, "Gaps and data loss", defines both).
    """


class RowPublishError(NatsError):
    """A row of a columnar publish (:meth:`JetStreamContext.publish_arrow`, a Spark write)
    was not sent or not stored: the text names its index, subject and why.

    The rows before it were acknowledged; rows after it may have been sent too
    (they were in flight), so publish again under the same ``msg_id_prefix``
    (the stream drops what it stored already) or read back what landed.

    Attributes:
        row: the row's index among the rows of the call (of the Spark task).
        subject: its subject (None when it had none).
    """

    def __init__(self, text: str = "", row: int | None = None, subject: str | None = None) -> None:
        super().__init__(text)
        self.row = row
        self.subject = subject
        self._keep_args(text, row, subject)

    def __reduce__(self) -> tuple[type[Self], tuple[str, int | None, str | None]]:
        return (type(self), (str(self), self.row, self.subject))


class UnknownOptionError(NatsError, ValueError):
    """A Spark data source option that the source does not take, refused when the query is
    planned, before anything runs (the text names the closest option it takes)."""
