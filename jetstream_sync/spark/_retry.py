"""A streaming query's looks at its stream ride out a short outage (``fetchOffset.*``).

Spark asks a streaming reader for the stream's end on the driver, between
micro-batches. A failure there stops the whole query (a failed task, by contrast,
is retried by Spark), so a server restart longer than one request's timeout used
to end every streaming query reading from it. As Kafka's source does with the
same two options, the look is tried again ``fetchOffset.numRetries`` times,
``fetchOffset.retryIntervalMs`` apart, when it failed in a way that passes: no
reply in time, the connection lost, no responders, or the server's 503.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import APIError, ConnectionLostError, NoRespondersError, TimeoutError
from ._options import Options

T = TypeVar("T")

log = logging.getLogger("jetstream_sync.spark")

#: Kafka's default for ``fetchOffset.numRetries``.
DEFAULT_RETRIES = 3
#: Between tries: longer than Kafka's 10 ms, because a server that is starting answers
#: "no responders" at once until its JetStream is ready, which takes about a second.
DEFAULT_INTERVAL_MS = 1000


def passes(exc: BaseException) -> bool:
    """Whether a failed request may succeed when tried again (an outage, not an answer)."""
    if isinstance(exc, APIError):
        return exc.code == 503
    return isinstance(exc, TimeoutError | ConnectionLostError | NoRespondersError)


@dataclass(frozen=True)
class Retries:
    """How often, and how far apart, a driver-side look is tried again.

    Attributes:
        count: tries after the first (``fetchOffset.numRetries``).
        interval: seconds between tries (``fetchOffset.retryIntervalMs``).
    """

    count: int
    interval: float

    @classmethod
    def of(cls, opts: Options) -> Retries:
        """The retries the options ask for (Kafka's option names).

        Raises:
            ValueError: either option is not a non-negative integer.
        """
        count = opts.integer("fetchOffset.numRetries", DEFAULT_RETRIES)
        interval_ms = opts.integer("fetchOffset.retryIntervalMs", DEFAULT_INTERVAL_MS)
        return cls(count, interval_ms / 1000)

    def call(self, what: str, look: Callable[[], T]) -> T:
        """``look()``, tried again after a failure that :func:`passes`.

        Raises:
            Exception: what the last try raised, or at once a failure that
                does not pass (a deleted stream, a permission error...).
        """
        for tried in range(self.count):
            try:
                return look()
            except Exception as exc:
                if not passes(exc):
                    raise
                log.warning(
                    "%s failed (%s: %s); try %d of %d in %g s",
                    what, type(exc).__name__, exc, tried + 2, self.count + 1, self.interval,
                )  # fmt: skip
            time.sleep(self.interval)
        return look()
