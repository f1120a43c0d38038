"""What the docs tell users to install covers the commands they are told to run.

No build and no venv: setup.cfg's extras, the installed pyspark's metadata and
the pages are read as they are.
"""

from __future__ import annotations

import configparser
import re
import shlex
from importlib.metadata import PackageNotFoundError, requires

import pytest
from packaging.requirements import Requirement

from tests.support.pythons import ROOT

PIPELINES_PAGE = ROOT / "docs" / "spark" / "key-value.md"


def _extra(name: str) -> set[str]:
    """The project names an extra of setup.cfg requires."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    lines = config["options.extras_require"][name].split("\n")
    return {Requirement(line).name.lower() for line in lines if line.strip()}


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same level."""
    start = text.index(heading + "\n")
    level = heading.split(" ")[0]
    end = re.search(rf"^{level} ", text[start + len(heading) :], re.MULTILINE)
    return text[start : start + len(heading) + end.start()] if end else text[start:]


def _pip_installed(section: str) -> list[Requirement]:
    """The requirements of every ``pip install`` command line in ``section``."""
    found = []
    for line in section.splitlines():
        _, sep, rest = line.partition("pip install ")
        if sep:
            words = shlex.split(rest.split("#")[0])
            found += [Requirement(w) for w in words if not w.startswith("-")]
    return found


def test_declarative_pipelines_page_installs_what_spark_pipelines_imports() -> None:
    """``spark-pipelines`` imports PyYAML (pyspark's ``pipelines`` extra), which the ``spark``
    extra does not bring: the page's install line asks for that extra too."""
    try:
        needed = [Requirement(r) for r in requires("pyspark") or []]
    except PackageNotFoundError:
        pytest.skip("pyspark is not installed")
    in_extra = [r for r in needed if r.marker and r.marker.evaluate({"extra": "pipelines"})]
    pipelines = {r.name.lower() for r in in_extra}
    assert "pyyaml" in pipelines and "pyyaml" not in _extra("spark")
    section = _section(PIPELINES_PAGE.read_text(encoding="utf-8"), "## Declarative pipelines")
    installed = _pip_installed(section)
    assert any(r.name == "jetstream_sync" and "spark" in r.extras for r in installed), installed
    assert any(r.name == "pyspark" and "pipelines" in r.extras for r in installed), installed
