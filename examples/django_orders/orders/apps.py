"""The orders app's configuration."""

from django.apps import AppConfig


class OrdersConfig(AppConfig):
    """Nothing connects in ``ready()``: the client is made on first use (``orders.nats``)."""

    name = "orders"
