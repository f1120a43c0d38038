"""The error a command raises for a problem that is the user's to fix (exit 1, no traceback)."""


class CommandError(Exception):
    """A command cannot do what was asked; the message says why and what to do."""
