"""A Flask app that publishes orders to JetStream, made to run under gunicorn.

``POST /orders`` with a JSON body ``{"order_id": "...", ...}`` publishes the
body to ``orders.new`` with ``msg_id=order-<order_id>`` and answers
``{"stream", "seq", "duplicate", "pid"}`` (201; 200 when the server already
had that order: a client that retries a request it got no answer for cannot
store the order twice). ``GET /status`` tells which process connected.

Run it (``NATS_URL`` names the server, default ``nats://127.0.0.1:4222``)::

    gunicorn --workers 2 --bind 127.0.0.1:8000 flask_app:app
    gunicorn --workers 2 --preload --bind 127.0.0.1:8000 'flask_app:create_app(connect_now=True)'

Why a lazily created client per process: gunicorn imports the app, then
forks its workers. A socket cannot be shared between processes, so every
worker needs its own connection; a client inherited through ``fork()``
refuses every call with ``ForkedClientError`` (its reader and writer threads
did not survive the fork, and the parent may still use the socket). The
holder below therefore connects on first use and again whenever
``os.getpid()`` differs from the process that connected. In the ``--preload``
variant the app connected in gunicorn's master process before the fork (to
check the stream at startup): each worker sees the pid change on its first
request, closes its copy of the inherited client (which only closes the
worker's file descriptor; the master's connection is not touched) and
connects again.
"""

from __future__ import annotations

import os
import threading

from flask import Flask, jsonify, request

import jetstream_sync as js

STREAM = "ORDERS"
SUBJECT = "orders.new"


class ProcessClient:
    """One JetStream connection per process: connected on first use, again after a fork.

    Args:
        url: the NATS server(s) to connect to.
    """

    def __init__(self, url: str) -> None:
        """Remember where to connect; nothing connects yet."""
        self.url = url
        self.pid: int | None = None  # the process that connected self._client
        self.inherited_from: int | None = None  # the pid whose client this process dropped
        self._client: js.Client | None = None
        self._ctx: js.JetStreamContext | None = None
        self._lock = threading.Lock()
        # A fork may happen while another thread holds the lock: the child gets a fresh one.
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def jetstream(self) -> js.JetStreamContext:
        """This process's JetStream context, connecting (and creating the stream) if needed.

        Raises:
            NoServersError: the server cannot be reached.
        """
        pid = os.getpid()
        with self._lock:
            if self._ctx is None or self.pid != pid:
                if self._client is not None:  # inherited through fork(): unusable here
                    self.inherited_from = self.pid
                    self._client.close()  # closes this process's copy of the socket only
                self._client, self._ctx = None, None
                client = js.connect(self.url, name=f"orders-web-{pid}")
                ctx = client.jetstream()
                ctx.create_or_update_stream(name=STREAM, subjects=["orders.>"])
                self._client, self._ctx, self.pid = client, ctx, pid
            return self._ctx


def create_app(url: str | None = None, *, connect_now: bool = False) -> Flask:
    """Build the app.

    Args:
        url: the NATS server; default ``$NATS_URL`` or ``nats://127.0.0.1:4222``.
        connect_now: connect (and check the stream) at once, before any worker
            forks when gunicorn runs with ``--preload``.
    """
    app = Flask(__name__)
    nats = ProcessClient(url or os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    if connect_now:
        nats.jetstream()

    @app.post("/orders")
    def post_order():  # type: ignore[no-untyped-def]
        order = request.get_json(silent=True)
        order_id = order.get("order_id") if isinstance(order, dict) else None
        if not isinstance(order_id, str) or not order_id:
            return jsonify(error='a JSON body with a non-empty "order_id" string'), 400
        try:
            ack = nats.jetstream().publish(SUBJECT, request.get_data(), msg_id=f"order-{order_id}")
        except (
            js.TimeoutError,
            js.ConnectionLostError,
            js.NoRespondersError,
            js.DuplicateMsgIdInProcessError,
            js.StreamTooManyRequestsError,
        ) as exc:
            # not known to be stored: the client retries with the same order_id
            return jsonify(error=f"not stored, retry: {exc}"), 503
        body = {
            "stream": ack.stream,
            "seq": ack.seq,
            "duplicate": ack.duplicate,
            "pid": os.getpid(),
        }
        return jsonify(body), 200 if ack.duplicate else 201

    @app.get("/status")
    def status():  # type: ignore[no-untyped-def]
        nats.jetstream()
        return jsonify(pid=os.getpid(), connected_in=nats.pid, inherited_from=nats.inherited_from)

    return app


app = create_app()

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=8000)
