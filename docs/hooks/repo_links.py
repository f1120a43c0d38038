"""MkDocs hook: links from a guide page to repository files outside ``docs/``.

On GitHub a page links to ``../../examples/cron_export.py`` and the file
opens; in the built site there is no such file, and ``mkdocs build --strict``
rightly calls it broken. This hook rewrites exactly those links (relative
links that climb to the repository root and name a file under one of the
source folders): to the file in the repository when ``repo_url`` is set,
else to the link's own text. Every other link is left for MkDocs to check.
"""

from __future__ import annotations

import re
from typing import Any

_SOURCE_DIRS = ("examples", "tests", "benchmarks", "jetstream_sync", "csrc")
_LINK = re.compile(
    r"\[(?P<label>[^\]]+)\]\((?P<ups>(?:\.\./)+)(?P<path>(?:"
    + "|".join(_SOURCE_DIRS)
    + r")/[^)\s]*)\)"
)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    """Rewrite the page's links to repository files outside ``docs/``."""
    to_root = page.file.src_uri.count("/") + 1  # "../" steps from the page to the repo root
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def rewrite(match: re.Match[str]) -> str:
        if match["ups"].count("../") != to_root:
            return match[0]
        if repo_url:
            return f"[{match['label']}]({repo_url}/blob/main/{match['path']})"
        return match["label"]

    return _LINK.sub(rewrite, markdown)
