"""The OpenTelemetry tests' fixture: ``otel``, the instrumentor on with in-memory exporters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from tests.fixtures.otel import Recorded, instrumented  # noqa: E402


@pytest.fixture
def otel() -> Iterator[Recorded]:
    """Spans and metrics of the instrumented client, recorded in memory for one test."""
    with instrumented() as recorded:
        yield recorded
