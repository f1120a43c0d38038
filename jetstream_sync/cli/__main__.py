"""``python -m jetstream_sync.cli``: the ``jetstream-sync`` command."""

from ._app import run

if __name__ == "__main__":
    run()
