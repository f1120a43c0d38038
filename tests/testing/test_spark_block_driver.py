"""The driver the Spark doc blocks share: each script runs as a program of its own would.

These scripts import no Spark, so they check the driver's own contract: the status, the
output, the working directory and environment of each script, and that one script's
changes do not reach the next.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.spark_block_driver import SparkBlockDriver

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[SparkBlockDriver]:
    """A driver whose log is in ``tmp_path``."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    started = SparkBlockDriver(tmp_path / "driver.log", env)
    yield started
    started.close()


def _script(tmp_path: Path, name: str, code: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    script = folder / "block.py"
    script.write_text(code)
    return script


def test_each_script_runs_as_main_in_its_directory_with_its_environment(
    driver: SparkBlockDriver, tmp_path: Path
) -> None:
    """``__name__`` is ``__main__``, the cwd is the script's folder, ``NATS_URL`` is its own,
    and a module next to the script imports; what it printed comes back."""
    code = (
        "import os, helper\n"
        "assert __name__ == '__main__'\n"
        "print(os.getcwd(), os.environ['NATS_URL'], helper.VALUE)\n"
        "os.environ['LEFT_BEHIND'] = '1'\n"
        "GLOBAL_OF_THE_FIRST = 1\n"
    )
    first = _script(tmp_path, "first", code)
    (first.parent / "helper.py").write_text("VALUE = 7\n")
    result = driver.run(first, {"NATS_URL": "nats://127.0.0.1:1"}, timeout=60)
    assert result == {"status": 0, "output": f"{first.parent} nats://127.0.0.1:1 7\n"}

    second = _script(
        tmp_path, "second",
        "import os\n"
        "assert 'LEFT_BEHIND' not in os.environ\n"
        "assert 'GLOBAL_OF_THE_FIRST' not in globals()\n"
        "print(os.getcwd(), os.environ['NATS_URL'])\n",
    )  # fmt: skip
    result = driver.run(second, {"NATS_URL": "nats://127.0.0.1:2"}, timeout=60)
    assert result == {"status": 0, "output": f"{second.parent} nats://127.0.0.1:2\n"}


@pytest.mark.parametrize(
    ("code", "status", "said"),
    [
        ("raise ValueError('broken block')\n", 1, "ValueError: broken block"),
        ("import sys\nsys.exit(3)\n", 3, "SystemExit: 3"),
        ("import sys\nsys.exit('a message')\n", 1, "SystemExit: a message"),
        ("import sys\nprint('fine')\nsys.exit(0)\n", 0, "fine"),
    ],
)
def test_the_status_is_a_programs_exit_status(
    driver: SparkBlockDriver, tmp_path: Path, code: str, status: int, said: str
) -> None:
    """An exception is status 1 with its traceback; ``sys.exit(n)`` is ``n``; the driver
    takes the next script either way."""
    result = driver.run(_script(tmp_path, "block", code), {}, timeout=60)
    assert result["status"] == status and said in result["output"], result
    after = driver.run(_script(tmp_path, "after", "print('next')\n"), {}, timeout=60)
    assert after == {"status": 0, "output": "next\n"}


def test_a_script_over_its_limit_stops_the_driver_with_its_stacks_in_the_log(
    driver: SparkBlockDriver, tmp_path: Path
) -> None:
    """A script that does not end in time: TimeoutError, and the log holds its stack."""
    script = _script(tmp_path, "stuck", "import threading\nthreading.Event().wait()\n")
    with pytest.raises(TimeoutError, match="after 2 s"):
        driver.run(script, {}, timeout=2)
    assert not driver.alive()
    assert "block.py" in driver.log.read_text()


def test_output_below_python_goes_to_the_log(driver: SparkBlockDriver, tmp_path: Path) -> None:
    """Writes to the file descriptors themselves (as a JVM's log does) go to the log file,
    never into the replies."""
    code = (
        "import os, subprocess\n"
        "os.write(2, b'fd two\\n')\n"
        f"subprocess.run([{sys.executable!r}, '-c', 'print(1)'])\n"
    )
    result = driver.run(_script(tmp_path, "fds", code), {}, timeout=60)
    assert result == {"status": 0, "output": ""}
    assert driver.log.read_text() == "fd two\n1\n"


def test_a_module_beside_one_script_is_not_the_next_scripts(
    driver: SparkBlockDriver, tmp_path: Path
) -> None:
    """Two scripts each import their own ``helper``: each gets its own."""
    for value in (1, 2):
        script = _script(tmp_path, f"s{value}", "import helper\nprint(helper.VALUE)\n")
        (script.parent / "helper.py").write_text(f"VALUE = {value}\n")
        assert driver.run(script, {}, timeout=60) == {"status": 0, "output": f"{value}\n"}
