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
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.doc_blocks import PAGE_FOLDERS, DocBlock, find_python_blocks
from tests.fixtures.server import NatsServer

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = REPO_ROOT / "docs"
BLOCK_TIMEOUT = 60.0
SPARK_BLOCK_TIMEOUT = 420.0


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
