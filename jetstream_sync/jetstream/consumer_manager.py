"""``ConsumerManager``: the consumer calls of ``Stream`` and ``JetStreamContext``.

Both declare the same consumer methods (the context's take the stream's name
first) and hand each call to the one ``ConsumerManager`` of their context, with
the stream's name and the context's default timeout. It checks names, merges
configs and sends the requests (create and update through ``consumer_admin.py``);
what it hands back are ``Consumer`` and ``OrderedConsumer`` handles.
"""

from __future__ import annotations

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

__all__ = ["ConsumerManager"]


def _deadline(timeout: float | None, default: float) -> Deadline:
    return Deadline(check_timeout("timeout", timeout, default))


class ConsumerManager:
    """Consumer management on any stream of one context, the stream named in each call.

    Every method takes the stream's name first and, last, the caller's default
    timeout (read by the caller at each call, so a changed ``ctx.timeout`` counts).
    The stream's name is checked here, before anything is sent (the ordered
    consumer's too, when it is made, though it sends nothing until its first pull).

    Args:
        client: the connection the handles it returns pull on.
        api: the context's API helper.
    """

    __slots__ = ("_api", "_client")

    def __init__(self, client: Client, api: JsApi) -> None:
        self._client = client
        self._api = api

    def _upsert(
        self,
        stream: str,
        config: ConsumerConfig | None,
        fields: dict[str, Any],
        action: str,
        timeout: float | None,
        default: float,
    ) -> Consumer:
        cfg = merge_config(ConsumerConfig, config, fields)
        return create_consumer(
            self._client, self._api, check_stream_name(stream), cfg, action,
            _deadline(timeout, default), default,
        )  # fmt: skip

    def create(
        self,
        stream: str,
        config: ConsumerConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
        default: float,
    ) -> Consumer:
        """Create a consumer (``Stream.create_consumer``)."""
        return self._upsert(stream, config, fields, CREATE, timeout, default)

    def update(
        self,
        stream: str,
        config: ConsumerConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
        default: float,
    ) -> Consumer:
        """Change an existing consumer (``Stream.update_consumer``)."""
        return self._upsert(stream, config, fields, UPDATE, timeout, default)

    def create_or_update(
        self,
        stream: str,
        config: ConsumerConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
        default: float,
    ) -> Consumer:
        """Create or update a consumer (``Stream.create_or_update_consumer``)."""
        return self._upsert(stream, config, fields, UPSERT, timeout, default)

    def consumer(self, stream: str, name: str, timeout: float | None, default: float) -> Consumer:
        """A handle on an existing consumer, its info fetched (``Stream.consumer``)."""
        cons = self._handle(stream, name, default)
        cons.info(timeout=timeout)
        return cons

    def consumer_no_info(self, stream: str, name: str, default: float) -> Consumer:
        """A handle on a consumer, nothing asked (``Stream.consumer_no_info``)."""
        return self._handle(stream, name, default)

    def info(self, stream: str, name: str, timeout: float | None, default: float) -> ConsumerInfo:
        """A consumer's info (``Stream.consumer_info``)."""
        return self._handle(stream, name, default).info(timeout=timeout)

    def _handle(self, stream: str, name: str, default: float) -> Consumer:
        check_stream_name(stream)
        return Consumer(self._client, self._api, stream, check_consumer_name(name), None, default)

    def delete(self, stream: str, name: str, timeout: float | None, default: float) -> bool:
        """Delete a consumer (``Stream.delete_consumer``)."""
        check_stream_name(stream)
        reply = self._api.request_json(
            _api.CONSUMER_DELETE, None, _deadline(timeout, default),
            stream=stream, consumer=check_consumer_name(name),
        )  # fmt: skip
        return bool(reply.get("success"))

    def names(self, stream: str, timeout: float | None, default: float) -> Iterator[str]:
        """The stream's consumer names, paged lazily (``Stream.consumer_names``)."""
        check_stream_name(stream)
        return self._api.pages(
            _api.CONSUMER_NAMES, "consumers", None, timeout, default, stream=stream
        )

    def infos(self, stream: str, timeout: float | None, default: float) -> Iterator[ConsumerInfo]:
        """The stream's consumer infos, paged lazily (``Stream.consumers``)."""
        check_stream_name(stream)
        pages = self._api.pages(
            _api.CONSUMER_LIST, "consumers", None, timeout, default, stream=stream
        )
        return (ConsumerInfo.from_api(item) for item in pages)

    def ordered(
        self,
        stream: str,
        config: OrderedConsumerConfig | None,
        fields: dict[str, Any],
        default: float,
    ) -> OrderedConsumer:
        """An ordered consumer (``Stream.ordered_consumer``); nothing is sent yet.

        Raises:
            ValueError, TypeError: ``stream`` is not a stream name, or a bad config.
        """
        check_stream_name(stream)
        cfg = merge_config(OrderedConsumerConfig, config, fields)
        return OrderedConsumer(self._client, self._api, stream, cfg, default)

    def pause(
        self,
        stream: str,
        name: str,
        until: datetime | None,
        timeout: float | None,
        default: float,
    ) -> PauseResponse:
        """Pause a consumer until ``until``, or resume it (``None``)."""
        check_stream_name(stream)
        name = check_consumer_name(name)
        return _pause(self._api, stream, name, until, _deadline(timeout, default))

    def unpin(
        self, stream: str, name: str, group: str, timeout: float | None, default: float
    ) -> None:
        """Unpin the pinned client of ``group`` (``Stream.unpin_consumer``)."""
        check_stream_name(stream)
        name = check_consumer_name(name)
        _unpin(self._api, stream, name, group, _deadline(timeout, default))
