"""MkDocs hook: code fences whose info string has more than the language, shown as code.

The docs mark their code blocks for the test suite with words after the language
(```python no-run, ```python spark, ```python from=examples/cron_export.py; see
tests/docs/test_docs.py and tests/docs/test_recipe_pages.py). MkDocs' fenced-code
extension takes only a language there: with another word the fence is not
recognised, the block renders as paragraphs (its ``#`` comments as headings), and
its closing fence opens a code block that swallows the text after it. This hook
keeps the first word (the language) of every opening fence, so the site shows
each block as code while the pages keep their markers.
"""

from __future__ import annotations

import re
from typing import Any

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Return the page with each opening fence's info string cut to its first word."""
    lines = markdown.split("\n")
    open_fence = ""
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if match is None:
            continue
        fence, words = match["fence"], match["info"].split()
        if open_fence:
            if fence[0] == open_fence[0] and len(fence) >= len(open_fence) and not words:
                open_fence = ""
            continue
        open_fence = fence
        if len(words) > 1:
            lines[i] = f"{match['indent']}{fence}{words[0]}"
    return "\n".join(lines)
