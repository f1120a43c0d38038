"""docs/recipes/*.md show only code that runs: excerpts of tested examples, links that resolve.

The recipes' code lives in ``examples/`` (each run by its own test); a page
quotes it in a block opened with ```python from=examples/FILE, and the quote
must appear verbatim in that file, so a page cannot drift from the code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES = REPO_ROOT / "docs" / "recipes"
PAGES = sorted(RECIPES.glob("*.md"))

_FENCE = re.compile(r"^```(?P<info>[^`]*)$")
_LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")


def code_blocks(page: Path) -> list[tuple[int, list[str], str]]:
    """(line, info words, text) of every fenced block of ``page``."""
    blocks, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        i += 1
        if opening is None:
            continue
        start, body = i, []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        i += 1
        blocks.append((start, opening["info"].split(), "\n".join(body) + "\n"))
    return blocks


def test_there_are_recipe_pages():
    """The recipes directory holds the index and the pages it lists."""
    assert {p.name for p in PAGES} >= {"index.md", "django.md", "jupyter.md", "cron.md", "flask.md"}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_python_blocks_are_verbatim_excerpts_of_tested_examples(page: Path):
    """Every python block names its source file, and appears in it word for word."""
    for line, info, text in code_blocks(page):
        if not info or info[0] != "python":
            continue
        sources = [w.removeprefix("from=") for w in info[1:] if w.startswith("from=")]
        assert sources, f"{page.name}:{line}: a python block needs from=examples/FILE"
        source = (REPO_ROOT / sources[0]).read_text(encoding="utf-8")
        assert text in source, f"{page.name}:{line} is not an excerpt of {sources[0]}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page: Path):
    """Every relative link of a recipe page points at an existing file."""
    for match in _LINK.finditer(page.read_text(encoding="utf-8")):
        target = match["target"]
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
