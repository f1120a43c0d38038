"""docs/hooks/fence_words.py: the site shows blocks marked for the test suite as code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "fence_words.py"


def _hook():
    spec = importlib.util.spec_from_file_location("fence_words", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.on_page_markdown


def test_opening_fences_keep_only_their_language():
    """``python no-run``, ``python spark`` and ``python from=...`` open plain python fences."""
    page = (
        "```python no-run\n# a comment, not a heading\n```\n\ntext\n\n"
        "```python spark\nx = 1\n```\n\n~~~python from=examples/cron_export.py\ny = 2\n~~~\n"
    )
    assert _hook()(page) == (
        "```python\n# a comment, not a heading\n```\n\ntext\n\n"
        "```python\nx = 1\n```\n\n~~~python\ny = 2\n~~~\n"
    )


def test_text_inside_a_block_is_left_alone():
    """A fence line quoted inside a longer fence is the block's text, not a fence."""
    page = "````markdown\n```python no-run\nx = 1\n```\n````\n\n```text\nplain\n```\n"
    assert _hook()(page) == page
