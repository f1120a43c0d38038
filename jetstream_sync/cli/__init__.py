"""The ``jetstream-sync`` command line: ``pub``/``sub``/``req``/``reply``, streams,
consumers, Key-Value, Object Store, a dev server and a benchmark, over the public API.

Run it as ``jetstream-sync ...`` (the console script) or ``python -m jetstream_sync.cli ...``;
see ``docs/cli.md``. Built on ``argparse``: no dependency beyond the package's own.
"""

from ._app import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
