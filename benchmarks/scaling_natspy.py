"""One point of the threads curve through nats-py, the way a threaded web server uses it.

``python -m benchmarks.scaling_natspy --port P --curve threads --x X --n SECONDS``

One event loop runs in a background thread; ``args.x`` threads each call
``asyncio.run_coroutine_threadsafe(js.publish(...), loop).result()`` (as S8).
"""

from __future__ import annotations

import asyncio
import threading
from argparse import Namespace
from typing import Any

from . import SUBJECT, emit, latency_fields, run_threads, unavailable
from .driver_natspy import ensure_stream
from .scaling import SIZE, point_args, point_row

CLIENT = "nats-py"


def threads(args: Namespace) -> None:
    """``args.x`` threads bridge into one event loop, each repeating ``js.publish``."""
    import nats

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="nats-py-loop")
    thread.start()

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    try:
        nc = on_loop(nats.connect(f"nats://127.0.0.1:{args.port}"))
        try:
            js = nc.jetstream()
            on_loop(ensure_stream(js, "file"))
            payload = b"x" * SIZE
            on_loop(js.publish(SUBJECT, payload))  # warm-up
            t, n, lat = run_threads(
                args.x, args.n, lambda i: lambda: on_loop(js.publish(SUBJECT, payload))
            )
        finally:
            on_loop(nc.close())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    emit(point_row(CLIENT, args, n, SIZE, t, **latency_fields(lat)))


def main(argv: list[str] | None = None) -> None:
    """Measure the point the command line names; print its JSON row."""
    args = point_args(argv)
    try:
        import nats  # noqa: F401
    except ImportError as e:
        unavailable(CLIENT, args.curve, f"nats-py is not installed ({e})")
        return
    if args.curve != "threads":
        unavailable(CLIENT, args.curve, "only the threads curve has a nats-py point")
        return
    threads(args)


if __name__ == "__main__":
    main()
