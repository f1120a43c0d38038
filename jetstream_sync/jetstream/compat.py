"""nats.py's entry points: ``pull_subscribe``, ``subscribe`` and their ``_bind`` forms.

The pull side (``PullSubscription``) is here; the push side in ``push.py``.
``JetStreamContext`` declares the four methods and passes itself to the
functions of these two modules, which use only its public methods.

For code moving from nats.py: the same names and the same behaviour,
including :meth:`PullSubscription.fetch` raising :class:`TimeoutError` when
nothing arrives (the native :meth:`Consumer.fetch` returns ``[]`` instead).
Unlike nats.py, every fetch uses its own inbox, so a late ``408`` from an
earlier fetch never cuts a later one short.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _defaults as D
from .._deadline import seconds_text
from .._subjects import filter_subject
from ..errors import ConsumerNotFoundError, NatsError, TimeoutError
from ..msg import Msg
from ._codec import merge_config
from ._pull_stream import MessageIterator
from .consumer import Consumer
from .consumer_config import ConsumerConfig
from .info import ConsumerInfo
from .push import check_filter

if TYPE_CHECKING:
    from .context import JetStreamContext

__all__ = ["PullSubscription", "pull_subscribe", "pull_subscribe_bind"]


class PullSubscription:
    """nats.py's ``PullSubscription``: fetch batches from a pull consumer.

    Attributes:
        consumer: the underlying :class:`Consumer` (its full API is there).
    """

    def __init__(self, consumer: Consumer, owned: bool) -> None:
        self.consumer = consumer
        self._owned = owned

    def fetch(
        self,
        batch: int = D.FETCH_BATCH,
        timeout: float = D.FETCH_TIMEOUT,
        heartbeat: float | None = None,
    ) -> list[Msg]:
        """Pull up to ``batch`` messages, waiting up to ``timeout`` seconds.

        Returns as soon as ``batch`` messages came, or at the timeout with
        what came by then.

        Raises:
            TimeoutError: no message at all within ``timeout`` (as nats.py).
            ConsumerDeletedError, PullStatusError, NoHeartbeatError: see
                :meth:`Consumer.fetch` (a ``batch`` past the consumer's
                ``max_batch`` raises ``PullRequestLimitError``; a ``timeout``
                past its ``max_expires`` is waited in shorter requests).
        """
        msgs = self.consumer.fetch(batch, timeout, heartbeat)
        if not msgs:
            raise TimeoutError(
                f"no messages from {self.consumer.name!r} within {seconds_text(timeout)} s"
            )
        return msgs

    def messages(self, **options: Any) -> MessageIterator:
        """Iterate the consumer's messages, blocking for each (``for msg in psub.messages()``).

        The loop of nats.py's JetStream docs; it is :meth:`Consumer.messages`
        (pre-fetching, surviving reconnects; the same keyword options), to use
        in a ``with`` block or end with ``stop()``. The loop waits as long as it
        takes; ``it.next(timeout)`` raises ``TimeoutError`` when nothing comes in time.
        """
        return self.consumer.messages(**options)

    def consumer_info(self, timeout: float | None = None) -> ConsumerInfo:
        """The consumer's current info.

        Raises:
            ConsumerNotFoundError: the consumer is gone.
        """
        return self.consumer.info(timeout)

    def unsubscribe(self) -> None:
        """Forget the subscription; an ephemeral consumer it created is deleted."""
        if self._owned:
            try:
                self.consumer.delete()
            except NatsError:
                pass

    def __enter__(self) -> PullSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unsubscribe()

    def __repr__(self) -> str:
        return f"<PullSubscription {self.consumer.stream_name}/{self.consumer.name}>"


def pull_subscribe(
    ctx: JetStreamContext,
    subject: str,
    durable: str | None,
    stream: str | None,
    config: ConsumerConfig | None,
    timeout: float | None,
) -> PullSubscription:
    """A pull consumer filtered on ``subject``, as nats.py's ``js.pull_subscribe``.

    The stream is looked up by subject unless given. With ``durable`` an
    existing consumer of that name is bound to, else created; without, an
    ephemeral consumer is created (deleted by ``unsubscribe()``).

    Raises:
        StreamNotFoundError: no stream captures ``subject``.
        BadSubjectError: ``subject`` is not a filter subject; nothing was sent.
        ValueError: the durable is a push consumer, or filters on other
            subjects than ``subject`` (or ``config``'s filters).
    """
    filter_subject(subject)
    if stream is None:
        stream = ctx.stream_name_by_subject(subject, timeout=timeout)
    durable = durable or (config.durable_name if config is not None else None)
    if durable:
        try:
            cons = ctx.consumer(stream, durable, timeout)
        except ConsumerNotFoundError:
            cons = None
        if cons is not None:
            info = cons.cached_info
            cfg = info.config if info is not None else None
            if cfg is not None and cfg.deliver_subject:
                raise ValueError(f"consumer {durable!r} is a push consumer")
            if info is not None:
                check_filter(info, subject, config)
            return PullSubscription(cons, owned=False)
    fields: dict[str, Any] = {}
    if durable:
        fields["durable_name"] = durable
    if config is None or not (config.filter_subject or config.filter_subjects):
        fields["filter_subject"] = subject
    cfg = merge_config(ConsumerConfig, config, fields)
    cons = ctx.create_consumer(stream, cfg, timeout=timeout)
    return PullSubscription(cons, owned=not durable)


def pull_subscribe_bind(
    ctx: JetStreamContext, stream: str, consumer: str, timeout: float | None
) -> PullSubscription:
    """Bind to an existing pull consumer, as nats.py's ``js.pull_subscribe_bind``.

    Raises:
        ConsumerNotFoundError: no such consumer.
    """
    return PullSubscription(ctx.consumer(stream, consumer, timeout), owned=False)
