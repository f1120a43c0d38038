"""``manage.py consume_orders``: process the orders from a durable pull consumer."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

import jetstream_sync as js
from orders.nats_client import get_jetstream


class Command(BaseCommand):
    """Fetch orders, process each (here: print it as a JSON line), acknowledge it."""

    help = "Consume orders until none came for --idle seconds, or --count were done."

    def add_arguments(self, parser: CommandParser) -> None:
        """``--count``, ``--idle`` and ``--batch``."""
        parser.add_argument("--count", type=int, default=None, help="stop after this many")
        parser.add_argument("--idle", type=float, default=2.0, help="stop after idle seconds")
        parser.add_argument("--batch", type=int, default=100, help="orders per fetch")

    def handle(self, *args: object, **options: object) -> None:
        """Run the fetch, process, ack loop; report how many orders were done."""
        count, idle, batch = options["count"], options["idle"], options["batch"]
        consumer = self.consumer()
        done = 0
        while count is None or done < count:
            want = batch if count is None else min(batch, count - done)
            msgs = consumer.fetch(want, timeout=idle)
            if not msgs:
                break  # idle: nothing new for --idle seconds
            for msg in msgs:
                self.process(msg)
                done += 1
                if msg is msgs[-1]:
                    # Acks travel in order: the server confirming this one
                    # means the batch's earlier acks have arrived too.
                    msg.ack_sync()
                else:
                    msg.ack()
        self.stderr.write(f"consumed {done} orders")

    def consumer(self) -> js.Consumer:
        """The durable consumer of the orders; created on first use."""
        ctx = get_jetstream()
        try:
            return ctx.consumer(settings.ORDERS_STREAM, settings.ORDERS_CONSUMER)
        except js.ConsumerNotFoundError:
            return ctx.create_consumer(
                settings.ORDERS_STREAM,
                durable_name=settings.ORDERS_CONSUMER,
                ack_policy=js.AckPolicy.EXPLICIT,
                filter_subject=settings.ORDERS_SUBJECT,
            )

    def process(self, msg: js.Msg) -> None:
        """Handle one order: this example writes it to stdout with its sequence."""
        order = json.loads(msg.data)
        self.stdout.write(json.dumps({"seq": msg.metadata.sequence.stream, "order": order}))
