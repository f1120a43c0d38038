"""Every ```python block in docs/*.md and docs/spark/*.md runs, as a complete program, against
a real server.

One test per block, id ``file.md:LINE`` (``spark/file.md:LINE`` for a page of a folder; the
line of the opening fence). The recipes' blocks are excerpts of tested examples, checked by
test_recipe_pages.py instead. Each block runs from a script file in a temp directory of its
own with ``NATS_URL`` set to a fresh JetStream server, the repo root on ``PYTHONPATH``, and
a 60 s limit. A block opened with ```python no-run is not collected. Its ``TMPDIR`` is a
folder of its own that must be empty when it ends: users copy these blocks, and what one
leaves in the temporary folder stays on their machine.

A block runs in a fresh interpreter (``sys.executable``), but for one opened with ```python
spark, which needs PySpark: it gets the ``spark`` marker, a 420 s limit and the Spark
environment (``SPARK_LOCAL_IP``, ``PYSPARK_PYTHON``), and runs in a driver process that the
module's Spark blocks share (tests/fixtures/spark_block_driver.py): one JVM, warmed once, a
fresh namespace and a new Spark session for each block. They are skipped where pyspark,
pyarrow or Java is missing. With no blocks, this module collects no tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.doc_blocks import PAGE_FOLDERS, DocBlock, find_python_blocks
from tests.fixtures.server import NatsServer
from tests.fixtures.spark_block_driver import SparkBlockDriver

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


def _block_environment(spark: bool) -> dict[str, str]:
    """The environment a block (or the Spark blocks' driver) runs in, but for ``NATS_URL``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    if spark:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _script(block: DocBlock, workdir: Path) -> Path:
    """The block written to a script file in ``workdir``."""
    script = workdir / f"doc_{block.path.stem}_L{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    return script


def _block_tmpdir(workdir: Path) -> Path:
    """The temporary folder a block runs with (its ``TMPDIR``), made empty."""
    tmpdir = workdir / "tmp"
    tmpdir.mkdir()
    return tmpdir


def _fail_if_left_behind(block: DocBlock, tmpdir: Path) -> None:
    """Fail when the block left files or folders in its temporary folder."""
    left = sorted(str(path.relative_to(tmpdir)) for path in tmpdir.iterdir())
    if left:
        pytest.fail(f"{block.id} left {left} in its temporary folder", pytrace=False)


def run_block(block: DocBlock, nats_url: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Run one block as a script in ``workdir`` in a fresh interpreter; on timeout, dump its
    threads and fail."""
    script = _script(block, workdir)
    env = _block_environment(block.spark)
    env["NATS_URL"] = nats_url
    env["TMPDIR"] = str(workdir / "tmp")
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


@pytest.fixture(scope="module")
def spark_block_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkBlockDriver]:
    """The driver process the module's Spark blocks share (taken by those blocks only, so
    that the other blocks stay spread over the workers)."""
    log = tmp_path_factory.mktemp("spark-block-driver") / "driver.log"
    driver = SparkBlockDriver(log, _block_environment(spark=True))
    yield driver
    driver.close()


def run_spark_block(
    block: DocBlock, nats_url: str, workdir: Path, driver: SparkBlockDriver
) -> None:
    """Run one Spark block in the shared driver; fail with its output and the driver's log."""
    if not driver.alive():
        pytest.fail(f"the Spark blocks' driver has stopped; its log:\n{_tail(driver.log)}")
    try:
        env = {"NATS_URL": nats_url, "TMPDIR": str(workdir / "tmp")}
        result = driver.run(_script(block, workdir), env, SPARK_BLOCK_TIMEOUT)
    except (TimeoutError, RuntimeError) as exc:
        pytest.fail(f"{block.id}: {exc}\n--- driver log ---\n{_tail(driver.log)}", pytrace=False)
    if result["status"] != 0:
        pytest.fail(
            f"{block.id} exited with status {result['status']}\n--- output ---\n"
            f"{result['output']}\n--- driver log ---\n{_tail(driver.log)}",
            pytrace=False,
        )


def _tail(log: Path, chars: int = 6000) -> str:
    """The end of a log file."""
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


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
    def test_doc_block_runs(
        block: DocBlock, nats_server: NatsServer, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """The docs code block runs to a zero exit status against a fresh server."""
        workdir = tmp_path / "run"
        workdir.mkdir()
        tmpdir = _block_tmpdir(workdir)
        if block.spark:
            _require_spark()
            driver = request.getfixturevalue("spark_block_driver")
            run_spark_block(block, nats_server.url, workdir, driver)
        else:
            result = run_block(block, nats_server.url, workdir)
            if result.returncode != 0:
                pytest.fail(
                    f"{block.id} exited with status {result.returncode}\n"
                    f"--- stderr ---\n{result.stderr}\n--- stdout ---\n{result.stdout}",
                    pytrace=False,
                )
        _fail_if_left_behind(block, tmpdir)
