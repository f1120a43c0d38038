"""Management commands of the orders app."""
