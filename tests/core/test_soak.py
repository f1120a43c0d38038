"""A 20 s soak (``benchmarks/soak.py``): cut links and restarts lose nothing, leak nothing.

Twenty seconds hold the whole fault schedule (two cuts, two restarts, see
:func:`benchmarks.soak.fault_schedule`); longer runs are the benchmark's
(``python -m benchmarks.soak --duration 600``).
"""

from __future__ import annotations

import pytest

from benchmarks.soak import Soak


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_twenty_second_soak_loses_nothing_stores_nothing_twice_and_leaks_nothing() -> None:
    """4 publishers and 2 consumers for 20 s through two cuts and two server restarts:
    every acked message consumed and stored exactly once, no thread or fd the run opened
    left open after close(), RSS growth under 20 MB."""
    report = Soak(duration=20.0, rate=250.0, catch_up=60.0).run()
    print(report.text())
    assert report.errors == []
    assert report.cuts >= 2 and report.restarts == 2
    assert report.reconnects >= 4  # both clients came back after the restarts at least
    assert report.acked == report.published > 0
    assert report.publish_retries > 0  # the faults hit publishes in flight
    assert report.lost == 0
    assert report.consumed == report.acked
    assert report.stored == report.acked
    assert report.stored_twice == 0 and report.missing_from_stream == 0
    assert report.leaked_threads == []
    assert report.leaked_fds == []
    assert report.rss_end_mb - report.rss_start_mb < 20
