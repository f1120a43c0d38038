"""Every ```python block in docs/*.md and docs/spark/*.md runs, as a complete program, against
a real server.

One test per block, id ``file.md:LINE`` (``spark/file.md:LINE`` for a page of a folder; the
line of the opening fence). The recipes' blocks are excerpts of tested examples, checked by
test_recipe_pages.py instead. Each
block runs in a fresh interpreter (``sys.executable``) in a temp directory with
``NATS_URL`` set to a fresh JetStream server, the repo root on ``PYTHONPATH``,
and a 60 s limit. A block opened with ```python no-run is not collected. A block
opened with ```python spark needs PySpark: it gets the ``spark`` marker, a 420 s
limit and the Spark environment (``SPARK_LOCAL_IP``, ``PYSPARK_PYTHON``), and is
skipped where pyspark, pyarrow or Java is missing. With no blocks, this module
collects no tests.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.server import NatsServer

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = REPO_ROOT / "docs"
PAGE_FOLDERS = ("spark",)  # folders of docs/ whose pages hold whole programs, like docs/*.md
BLOCK_TIMEOUT = 60.0
SPARK_BLOCK_TIMEOUT = 420.0
PYTHON_LANGUAGES = {"python", "py", "python3"}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class DocBlock:
    """One runnable code block: where it is and its source."""

    path: Path
    line: int
    code: str
    spark: bool = False

    @property
    def id(self) -> str:
        """``file.md:LINE``, or ``folder/file.md:LINE`` for a page of a folder of docs/."""
        folder = self.path.parent.name
        name = f"{folder}/{self.path.name}" if folder in PAGE_FOLDERS else self.path.name
        return f"{name}:{self.line}"


def find_python_blocks(path: Path) -> list[DocBlock]:
    """Return the runnable ```python blocks of one Markdown file (CommonMark fences)."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        words = opening["info"].split()
        start, body = i + 1, []
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            text = lines[i]
            strip = len(text) - len(text.lstrip(" "))
            body.append(text[min(strip, indent) :])
            i += 1
        i += 1  # past the closing fence (or the end of the file)
        runnable = words and words[0].lower() in PYTHON_LANGUAGES and "no-run" not in words[1:]
        if runnable:
            code = "\n".join(body) + "\n"
            blocks.append(DocBlock(path, start, code, spark="spark" in words[1:]))
    return blocks


def collect_doc_blocks(docs_dir: Path = DOCS_DIR) -> list[DocBlock]:
    """Return the runnable blocks of every ``docs_dir/*.md`` and ``docs_dir/FOLDER/*.md`` (each
    of PAGE_FOLDERS), in file then line order."""
    if not docs_dir.is_dir():
        return []
    pages = sorted(docs_dir.glob("*.md"))
    for folder in PAGE_FOLDERS:
        pages += sorted((docs_dir / folder).glob("*.md"))
    return [block for md in pages for block in find_python_blocks(md)]


def run_block(block: DocBlock, nats_url: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Run one block as a script in ``workdir``; on timeout, dump its threads and fail."""
    script = workdir / f"doc_{block.path.stem}_L{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    env = dict(os.environ)
    env["NATS_URL"] = nats_url
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    if block.spark:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    limit = SPARK_BLOCK_TIMEOUT if block.spark else BLOCK_TIMEOUT
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(
            f"{block.id} still running after {limit:g} s\n"
            f"--- stderr ---\n{stderr}\n--- stdout ---\n{stdout}",
            pytrace=False,
        )
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


DOC_BLOCKS = collect_doc_blocks()


def _param(block: DocBlock):
    """The block as a test parameter; Spark blocks get the spark marker and a longer timeout."""
    if not block.spark:
        return pytest.param(block, id=block.id)
    marks = [pytest.mark.spark, pytest.mark.timeout(SPARK_BLOCK_TIMEOUT + 60)]
    return pytest.param(block, id=block.id, marks=marks)


def _require_spark() -> None:
    """Skip unless pyspark, pyarrow and Java are there."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 or newer")


if DOC_BLOCKS:

    @pytest.mark.parametrize("block", [_param(b) for b in DOC_BLOCKS])
    def test_doc_block_runs(block: DocBlock, nats_server: NatsServer, tmp_path: Path) -> None:
        """The docs code block runs to a zero exit status against a fresh server."""
        if block.spark:
            _require_spark()
        workdir = tmp_path / "run"
        workdir.mkdir()
        result = run_block(block, nats_server.url, workdir)
        if result.returncode != 0:
            pytest.fail(
                f"{block.id} exited with status {result.returncode}\n"
                f"--- stderr ---\n{result.stderr}\n--- stdout ---\n{result.stdout}",
                pytrace=False,
            )
