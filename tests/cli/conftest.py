"""The command line's tests: ``cli`` runs ``jetstream-sync`` against the shared server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.cli import Cli
from tests.fixtures.server import NatsServer


@pytest.fixture
def cli(shared_server: NatsServer, tmp_path: Path) -> Iterator[Cli]:
    """``jetstream-sync`` commands against the shared server, from a temporary directory
    (``tests/fixtures/cli.py``)."""
    runner = Cli(shared_server.url, tmp_path)
    yield runner
    runner.close()
