"""The sdist and the manylinux abi3 wheel: what they hold, and where they install.

The wheel is built once per session with this interpreter, then installed into
a fresh venv of every tested Python (setup.cfg's classifiers) with no C
compiler reachable, where the quickstart runs against a dev server on the C
core. The sdist installs where a compiler is present.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from tests.fixtures.doc_blocks import find_python_blocks
from tests.fixtures.packaging import Dists, built_dists, make_venv, venv_env
from tests.fixtures.server import NatsServer
from tests.support.pythons import ROOT, classified_versions, find_python

# The first test builds the wheel (a minute or two on a loaded machine); the group keeps every
# test of the module on the worker that built it (tests/fixtures/workers.py).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.xdist_group("packaging")]

THIS_VERSION = "{}.{}".format(*sys.version_info[:2])
QUICKSTART = find_python_blocks(ROOT / "docs" / "quickstart.md")

# Run in a venv: no compiler is reachable there.
CHECK_NO_COMPILER = """
import shutil, sysconfig
compilers = ["cc", "gcc", "clang", "c99", (sysconfig.get_config_var("CC") or "cc").split()[0]]
reachable = [c for c in compilers if shutil.which(c)]
assert not reachable, f"compilers reachable: {reachable}"
"""
# Run in a venv: the C core of the installed package (not of a checkout) is the one loaded.
CHECK_C_CORE = """
import sys
import jetstream_sync
assert jetstream_sync.__file__.startswith(sys.prefix), jetstream_sync.__file__
assert jetstream_sync.__impl__ == "c", jetstream_sync.__impl__
print(sys.version_info[:2], jetstream_sync.__impl__, jetstream_sync.__file__)
"""


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The session's sdist and wheel."""
    return built_dists(tmp_path_factory)


def _run(argv: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; fail the test with its output if it exits non-zero."""
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=300, **kwargs
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{argv} exited {proc.returncode}\n--- stdout ---\n{proc.stdout}"
            f"\n--- stderr ---\n{proc.stderr}",
            pytrace=False,
        )
    return proc


def test_wheel_is_manylinux_cp311_abi3(dists: Dists) -> None:
    """The wheel is tagged cp311-abi3-manylinux and carries the abi3 C core."""
    _, _, _, tags = parse_wheel_filename(dists.wheel.name)
    assert {(t.interpreter, t.abi) for t in tags} == {("cp311", "abi3")}
    assert all(t.platform.startswith("manylinux") for t in tags), tags
    names = zipfile.ZipFile(dists.wheel).namelist()
    assert "jetstream_sync/_ffi.abi3.so" in names
    assert "jetstream_sync/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), names


def test_sdist_holds_what_the_build_needs(dists: Dists) -> None:
    """The sdist carries the C sources and headers, the cffi builder, the build config and
    the license, and no tests (they need the repository's fixtures)."""
    with tarfile.open(dists.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    needed = {p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").glob("*.[ch]")}
    needed |= {"jetstream_sync/_build_ffi.py", "setup.py", "setup.cfg", "pyproject.toml", "LICENSE"}
    assert needed <= names, sorted(needed - names)
    assert not [name for name in names if name.startswith("tests/")]  # no fixtures to run them


def test_sdist_installs_where_a_compiler_is(dists: Dists, tmp_path: Path) -> None:
    """``pip install`` of the sdist compiles the C core, which is then the one loaded."""
    python = make_venv(Path(sys.executable), tmp_path / "venv")
    env = venv_env(tmp_path / "venv", compiler=True)
    _run([python, "-m", "pip", "install", "-q", dists.sdist], cwd=tmp_path, env=env)
    _run([python, "-c", CHECK_C_CORE], cwd=tmp_path, env=env)


@pytest.mark.parametrize("version", classified_versions())
def test_wheel_installs_and_runs_without_a_compiler(
    version: str, dists: Dists, nats_server: NatsServer, tmp_path: Path
) -> None:
    """On each tested Python, the wheel installs with no compiler and the quickstart runs on C."""
    base = Path(sys.executable) if version == THIS_VERSION else find_python(version)
    if base is None:
        pytest.skip(f"no python{version} found (pyenv, PATH)")
    venv = tmp_path / "venv"
    python = make_venv(base, venv)
    env = venv_env(venv, compiler=False, NATS_URL=nats_server.url)
    _run([python, "-c", CHECK_NO_COMPILER], cwd=tmp_path, env=env)
    _run([python, "-m", "pip", "install", "-q", dists.wheel], cwd=tmp_path, env=env)
    _run([python, "-c", CHECK_C_CORE], cwd=tmp_path, env=env)
    assert QUICKSTART, "docs/quickstart.md has no runnable block"
    for block in QUICKSTART:
        script = tmp_path / f"quickstart_L{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        _run([python, script], cwd=tmp_path, env=env)
