"""``POST /orders/``: publish an order to JetStream, answer with its stream sequence."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

import jetstream_sync as js

from .nats_client import get_jetstream


@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    """Publish the JSON body to ``settings.ORDERS_SUBJECT``; 201 with the PubAck.

    An ``Idempotency-Key`` header becomes the message id, so a retried
    request is stored once (the answer then says ``"duplicate": true``).
    A body that is not a JSON object is a 400; NATS being unreachable or
    not answering in ``settings.NATS_TIMEOUT`` is a 503 (retry with the
    same key).
    """
    try:
        order = json.loads(request.body)
    except ValueError:
        return JsonResponse({"error": "the body must be JSON"}, status=400)
    if not isinstance(order, dict):
        return JsonResponse({"error": "the body must be a JSON object"}, status=400)
    try:
        ack = get_jetstream().publish(
            settings.ORDERS_SUBJECT,
            json.dumps(order).encode(),
            msg_id=request.headers.get("Idempotency-Key"),
        )
    except (
        js.NoServersError,  # the server is down
        js.NoRespondersError,  # no stream stores the subject (run setup_orders)
        js.TimeoutError,  # no PubAck in time: retry with the same Idempotency-Key
        js.ConnectionLostError,  # the connection broke before the PubAck came
        js.DuplicateMsgIdInProcessError,  # a retry arrived while the first copy was stored
        js.StreamTooManyRequestsError,  # the stream is busy: not stored
        js.ConnectionClosedError,  # the client gave up reconnecting: the next request reconnects
    ) as exc:
        return JsonResponse({"error": f"orders unavailable: {type(exc).__name__}"}, status=503)
    return JsonResponse(
        {"stream": ack.stream, "seq": ack.seq, "duplicate": ack.duplicate}, status=201
    )
