"""Every client's :attr:`Client.stats`, read by the metric reader when it collects.

Nothing is counted on the hot paths for these: the connection keeps the
counters anyway, and the observable instruments read them at collection time.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..client import Client, ClientStats
from ._telemetry import A_SYSTEM, SYSTEM

A_CLIENT = "messaging.client.id"


class ClientStatsObserver:
    """The clients made while instrumented, and the observable instruments over their stats.

    Args:
        meter: the instruments are made on it.
    """

    def __init__(self, meter: Meter) -> None:
        self._clients: weakref.WeakKeyDictionary[Client, str] = weakref.WeakKeyDictionary()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        for name, unit, field, description in (
            ("nats.client.sent.messages", "{message}", "out_msgs", "Messages written."),
            ("nats.client.received.messages", "{message}", "in_msgs", "Messages received."),
            ("nats.client.sent.bytes", "By", "out_bytes", "Protocol bytes written."),
            ("nats.client.received.bytes", "By", "in_bytes", "Message bytes received."),
            ("nats.client.reconnects", "{reconnect}", "reconnects", "Reconnections."),
        ):
            meter.create_observable_counter(
                name,
                callbacks=[functools.partial(self._observe, field)],
                unit=unit,
                description=f"{description} Client.stats.{field} of each client.",
            )

    def add(self, client: Client) -> None:
        """Report ``client``'s stats from now on (until it is garbage-collected)."""
        with self._lock:
            self._clients[client] = f"{next(self._numbers)}"

    def _observe(self, field: str, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            clients = list(self._clients.items())
        for client, number in clients:
            stats: ClientStats = client.stats
            yield Observation(getattr(stats, field), {A_SYSTEM: SYSTEM, A_CLIENT: number})


def tracking_init(
    observer: ClientStatsObserver, original: Callable[..., Any]
) -> Callable[..., Any]:
    """``Client.__init__`` that also hands the new client to ``observer``."""

    @functools.wraps(original)
    def wrapper(self: Client, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        observer.add(self)

    return wrapper
