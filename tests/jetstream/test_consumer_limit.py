"""How many consumers a stream may hold: nats-server 2.15's default of 1,000, typed."""

from __future__ import annotations

import pytest

import jetstream_sync
from tests.fixtures.server import NatsServer

SERVER_DEFAULT = 1_000  # nats-server 2.15: jetstream { limits { default_max_consumers } }


def test_a_stream_holds_1000_consumers_unless_it_asks_for_more(nats_server: NatsServer) -> None:
    """On a server without its own limit, a stream takes 1,000 consumers (its
    ``max_consumers=-1`` does not lift that); the next one raises
    MaximumConsumersLimitError naming the stream. A positive ``max_consumers`` above the
    default takes more."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(name="MANY", subjects=["many.>"], max_consumers=-1)
        for _ in range(SERVER_DEFAULT):
            stream.create_consumer(inactive_threshold=60.0)
        with pytest.raises(jetstream_sync.MaximumConsumersLimitError) as refused:
            stream.create_consumer(inactive_threshold=60.0)
        assert (refused.value.err_code, refused.value.stream) == (10026, "MANY")
        js.update_stream(stream.info().config, max_consumers=SERVER_DEFAULT + 1)
        stream.create_consumer(inactive_threshold=60.0)
        assert stream.info().state.consumer_count == SERVER_DEFAULT + 1
