"""The orders app: a view that publishes orders, a command that consumes them."""
