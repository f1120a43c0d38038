"""tests/support/stages.py, the runner of ``make test``, on a Makefile of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.stages import QUIET_NICENESS, main

MAKEFILE = """\
slow:
\t@echo slow-out; sleep 0.3; echo slow-done
broken:
\t@echo broken-out; exit 3
fine:
\t@echo fine-out
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "Makefile").write_text(MAKEFILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_stage_runs_and_a_failed_one_fails_the_whole(project, capfd):
    """A failing stage does not stop the others; each log is printed whole; exit status 1."""
    assert main(("broken", "slow", "fine"), foreground="slow") == 1
    out, err = capfd.readouterr()
    for text in ("slow-out", "slow-done", "broken-out", "fine-out"):
        assert text in out
    assert out.index("slow-done") < out.index("== make broken") < out.index("broken-out")
    summary = out[out.index("== make test: stages") :]
    assert "broken     FAILED" in summary and "slow       passed" in summary
    assert "make test FAILED: broken" in err


def test_the_quiet_stages_run_beside_the_foreground_one(project, capfd):
    """A quiet stage and the foreground one meet through a FIFO, which each opens only when the
    other has: run one after the other they could not (each gives up after 60 s)."""
    os.mkfifo(project / "meet")
    (project / "Makefile").write_text(
        "writer:\n\t@timeout 60 sh -c 'echo met > meet'\nreader:\n\t@timeout 60 cat meet\n"
    )
    assert main(("writer", "reader"), foreground="reader") == 0
    out = capfd.readouterr().out
    assert "met" in out and "make test passed" in out


def test_the_quiet_stages_yield_the_cpu_to_the_foreground_one(project, capfd):
    """A quiet stage runs niced by QUIET_NICENESS more than the foreground stage."""
    (project / "Makefile").write_text(
        "quiet:\n\t@echo quiet-$$(nice)\nloud:\n\t@echo loud-$$(nice)\n"
    )
    assert main(("quiet", "loud"), foreground="loud") == 0
    out = capfd.readouterr().out
    own = os.nice(0)
    assert f"loud-{own}" in out
    assert f"quiet-{min(own + QUIET_NICENESS, 19)}" in out
