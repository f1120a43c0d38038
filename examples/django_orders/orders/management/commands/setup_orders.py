"""``manage.py setup_orders``: create (or update) the ORDERS stream; run it at deploy time."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from orders.nats_client import get_jetstream


class Command(BaseCommand):
    """Create or update the stream that stores the orders."""

    help = "Create or update the JetStream stream of the orders."

    def handle(self, *args: object, **options: object) -> None:
        """Create or update the stream, and say so."""
        stream = get_jetstream().create_or_update_stream(
            name=settings.ORDERS_STREAM, subjects=["orders.>"]
        )
        self.stdout.write(f"stream {stream.name} ready")
