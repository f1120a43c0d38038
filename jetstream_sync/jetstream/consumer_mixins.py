"""Consumer management methods of ``Stream`` and ``JetStreamContext`` (mixins).

The same calls exist on a stream handle and, with the stream's name first, on
the context. They check names, merge configs and delegate the requests to
``consumer_admin.py`` (create/update) and the ``Consumer`` handle.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._deadline import Deadline, check_timeout
from . import _api
from ._codec import merge_config
from ._names import check_consumer_name, check_stream_name
from .consumer import Consumer, PauseResponse, _pause, _unpin
from .consumer_admin import CREATE, UPDATE, UPSERT, create_consumer
from .consumer_config import ConsumerConfig, OrderedConsumerConfig
from .info import ConsumerInfo
from .ordered import OrderedConsumer

if TYPE_CHECKING:
    from ..client import Client
    from ._api import JsApi
    from .context import JetStreamContext

__all__ = ["ContextConsumersMixin", "StreamConsumersMixin"]


class _Admin(abc.ABC):
    """The operations both mixins share, given a stream name."""

    @abc.abstractmethod
    def _client_api_timeout(self) -> tuple[Client, JsApi, float]:
        """The connection, the API helper and the default timeout."""

    def _cdeadline(self, timeout: float | None) -> Deadline:
        return Deadline(check_timeout("timeout", timeout, self._client_api_timeout()[2]))

    def _upsert(
        self,
        stream: str,
        config: ConsumerConfig | None,
        fields: dict[str, Any],
        action: str,
        timeout: float | None,
    ) -> Consumer:
        cfg = merge_config(ConsumerConfig, config, fields)
        client, api, default = self._client_api_timeout()
        return create_consumer(
            client, api, check_stream_name(stream), cfg, action, self._cdeadline(timeout), default
        )

    def _consumer(self, stream: str, name: str, timeout: float | None) -> Consumer:
        client, api, default = self._client_api_timeout()
        cons = Consumer(client, api, stream, check_consumer_name(name), None, default)
        cons.info(timeout=timeout)
        return cons

    def _delete(self, stream: str, name: str, timeout: float | None) -> bool:
        _, api, _ = self._client_api_timeout()
        reply = api.request_json(
            _api.CONSUMER_DELETE, None, self._cdeadline(timeout),
            stream=stream, consumer=check_consumer_name(name),
        )  # fmt: skip
        return bool(reply.get("success"))

    def _ordered(
        self, stream: str, config: OrderedConsumerConfig | None, fields: dict[str, Any]
    ) -> OrderedConsumer:
        cfg = merge_config(OrderedConsumerConfig, config, fields)
        client, api, default = self._client_api_timeout()
        return OrderedConsumer(client, api, stream, cfg, default)


class StreamConsumersMixin(_Admin):
    """Consumer management on a ``Stream`` (uses ``self._ctx``, ``self._api``, ``self.name``)."""

    _ctx: JetStreamContext
    _api: JsApi
    name: str

    def _client_api_timeout(self) -> tuple[Client, JsApi, float]:
        return self._ctx.client, self._api, self._ctx.timeout

    def create_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Create a consumer on this stream from a :class:`ConsumerConfig` and/or its fields.

        Without ``name`` or ``durable_name`` the consumer is ephemeral, with a
        generated name. Creating one that exists with the same config succeeds.

        Raises:
            ConsumerExistsError: it exists with another config.
            StreamNotFoundError: the stream does not exist.
            ValueError, TypeError: a bad config, raised before sending.
            TimeoutError: no answer within ``timeout``.
        """
        return self._upsert(self.name, config, fields, CREATE, timeout)

    def update_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Change an existing consumer's config.

        Raises:
            ConsumerDoesNotExistError: there is no consumer of that name.
            APIError: a field that cannot change was changed.
        """
        return self._upsert(self.name, config, fields, UPDATE, timeout)

    def create_or_update_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Create the consumer, or update it when it exists.

        Raises:
            APIError: the server refused the config.
        """
        return self._upsert(self.name, config, fields, UPSERT, timeout)

    def consumer(self, name: str, timeout: float | None = None) -> Consumer:
        """A handle on an existing consumer, with its info fetched.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumer(self.name, name, timeout)

    def consumer_info(self, name: str, timeout: float | None = None) -> ConsumerInfo:
        """The info of consumer ``name``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumer(self.name, name, timeout).cached_info  # type: ignore[return-value]

    def delete_consumer(self, name: str, timeout: float | None = None) -> bool:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._delete(self.name, name, timeout)

    def consumer_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of this stream's consumers, paged lazily (``timeout`` spans all pages)."""
        return self._api.pages(
            _api.CONSUMER_NAMES, "consumers", None, timeout, self._ctx.timeout, stream=self.name
        )

    def consumers(self, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """The info of every consumer of this stream, paged lazily."""
        return (
            ConsumerInfo.from_api(item)
            for item in self._api.pages(
                _api.CONSUMER_LIST, "consumers", None, timeout, self._ctx.timeout, stream=self.name
            )
        )

    def ordered_consumer(
        self, config: OrderedConsumerConfig | None = None, **fields: Any
    ) -> OrderedConsumer:
        """An ordered consumer on this stream (nothing is created until the first pull).

        Raises:
            ValueError, TypeError: a bad config.
        """
        return self._ordered(self.name, config, fields)

    def pause_consumer(
        self, name: str, until: datetime, timeout: float | None = None
    ) -> PauseResponse:
        """Pause consumer ``name`` until ``until`` (server 2.11+)."""
        _, api, _ = self._client_api_timeout()
        return _pause(api, self.name, check_consumer_name(name), until, self._cdeadline(timeout))

    def resume_consumer(self, name: str, timeout: float | None = None) -> PauseResponse:
        """Resume a paused consumer."""
        _, api, _ = self._client_api_timeout()
        return _pause(api, self.name, check_consumer_name(name), None, self._cdeadline(timeout))

    def unpin_consumer(self, name: str, group: str, timeout: float | None = None) -> None:
        """Unpin the pinned client of ``group`` on consumer ``name`` (server 2.11+)."""
        _, api, _ = self._client_api_timeout()
        _unpin(api, self.name, check_consumer_name(name), group, self._cdeadline(timeout))


class ContextConsumersMixin(_Admin):
    """Consumer management on a ``JetStreamContext``: the stream's name comes first.

    Uses ``self._api``, ``self.client``, ``self.timeout``, ``self.stream_no_info``.
    """

    _api: JsApi
    client: Client
    timeout: float

    def _client_api_timeout(self) -> tuple[Client, JsApi, float]:
        return self.client, self._api, self.timeout

    def _stream_admin(self, stream: str) -> StreamConsumersMixin:
        return self.stream_no_info(stream)  # type: ignore[attr-defined,no-any-return]

    def create_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Create a consumer on ``stream``; see :meth:`Stream.create_consumer`."""
        return self._upsert(stream, config, fields, CREATE, timeout)

    def update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Update a consumer on ``stream``; see :meth:`Stream.update_consumer`."""
        return self._upsert(stream, config, fields, UPDATE, timeout)

    def create_or_update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Create or update a consumer on ``stream``."""
        return self._upsert(stream, config, fields, UPSERT, timeout)

    def consumer(self, stream: str, name: str, timeout: float | None = None) -> Consumer:
        """A handle on consumer ``name`` of ``stream``, info fetched.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._stream_admin(stream).consumer(name, timeout)

    def consumer_info(self, stream: str, name: str, timeout: float | None = None) -> ConsumerInfo:
        """The info of consumer ``name`` of ``stream``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._stream_admin(stream).consumer_info(name, timeout)

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> bool:
        """Delete consumer ``name`` of ``stream``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._stream_admin(stream).delete_consumer(name, timeout)

    def consumer_names(self, stream: str, timeout: float | None = None) -> Iterator[str]:
        """The consumer names of ``stream``, paged lazily."""
        return self._stream_admin(stream).consumer_names(timeout)

    def consumers(self, stream: str, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """The consumer infos of ``stream``, paged lazily."""
        return self._stream_admin(stream).consumers(timeout)

    def ordered_consumer(
        self, stream: str, config: OrderedConsumerConfig | None = None, **fields: Any
    ) -> OrderedConsumer:
        """An ordered consumer on ``stream``."""
        return self._ordered(stream, config, fields)

    def pause_consumer(
        self, stream: str, name: str, until: datetime, timeout: float | None = None
    ) -> PauseResponse:
        """Pause a consumer until ``until`` (server 2.11+)."""
        return self._stream_admin(stream).pause_consumer(name, until, timeout)

    def resume_consumer(
        self, stream: str, name: str, timeout: float | None = None
    ) -> PauseResponse:
        """Resume a paused consumer."""
        return self._stream_admin(stream).resume_consumer(name, timeout)

    def unpin_consumer(
        self, stream: str, name: str, group: str, timeout: float | None = None
    ) -> None:
        """Unpin the pinned client of a priority group."""
        self._stream_admin(stream).unpin_consumer(name, group, timeout)
