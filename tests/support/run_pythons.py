"""Run the test suite on each tested Python version, each in its own venv (``make test-pythons``).

usage: python -m tests.support.run_pythons [--full] [--not-default] [VERSION ...]

The versions default to setup.cfg's ``Programming Language :: Python :: 3.X``
classifiers. For each, the interpreter is found (``tests.support.pythons``), a venv
``.venv-X.Y`` is created at the repository root and the package installed in
it with the ``test`` extra, exactly as the Makefile installs ``.venv`` (kept
while setup.cfg, setup.py, pyproject.toml and the C sources are unchanged),
then pytest runs there, on ``TEST_WORKERS`` (4) pytest-xdist workers as ``make
suite`` does (the fuzz tests included). Without ``--full`` it runs the suite minus
``QUICK_SKIPS`` (see there why); ``--full`` runs all of it. A version with no
interpreter is reported as skipped, by name; the exit status is 1 if any
found version failed to install or to pass. ``--not-default`` leaves out the
version of the interpreter running this script (the one ``make test`` builds
``.venv`` with, which has run the whole suite there). A summary with each
version's install and test time (wall clock, and the CPU time the tests
used, which a loaded machine does not inflate) ends the output.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.pythons import ROOT, classified_versions, find_python

# What the quick run leaves out, and why: the benchmarks measure speed, not
# behaviour, and take minutes; the packaging tests already install the wheel
# into every tested version from the default run; the Spark tests that start a
# standalone cluster or run the whole pipeline exercise the JVM and process
# plumbing, which is the same on every Python (the other Spark tests, the data
# sources' behaviour, run).
QUICK_SKIPS = (
    "--ignore=tests/bench",
    "--ignore=tests/packaging",
    "--ignore=tests/spark/test_spark_standalone.py",
    "--ignore=tests/spark/test_pipeline.py",
)
_INSTALL_INPUTS = ("setup.cfg", "setup.py", "pyproject.toml", "jetstream_sync/_build_ffi.py")
_PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check")


@dataclass
class Outcome:
    """What happened to one version."""

    version: str
    python: Path | None = None
    status: str = "skipped"
    install_s: float = 0.0
    test_s: float = 0.0
    test_cpu_s: float = 0.0

    def line(self) -> str:
        """One summary line."""
        if self.python is None:
            return f"  {self.version}  skipped: no python{self.version} found (pyenv, PATH)"
        return (
            f"  {self.version}  {self.status:<24} install {self.install_s:6.0f} s"
            f"  tests {self.test_s:6.0f} s (CPU {self.test_cpu_s:6.0f} s)  ({self.python})"
        )


def install_digest() -> str:
    """A digest of everything whose change needs a reinstall (the Makefile's stamp inputs)."""
    digest = hashlib.sha256()
    paths = [ROOT / name for name in _INSTALL_INPUTS]
    paths += sorted((ROOT / "csrc").glob("*.[ch]"))
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def ensure_venv(python: Path, venv: Path) -> None:
    """Create ``venv`` with ``python`` and install the package and its test extra, if stale.

    Args:
        python: the interpreter to base the venv on.
        venv: where the venv lives.

    Raises:
        subprocess.CalledProcessError: a step failed.
    """
    stamp = venv / ".installed"
    digest = install_digest()
    vpy = venv / "bin" / "python"
    if stamp.is_file() and stamp.read_text() == digest and vpy.exists():
        return
    if not vpy.exists():
        _run([str(python), "-m", "venv", str(venv)])
    _run([str(vpy), *_PIP, "-U", "pip", "setuptools", "wheel", "cffi"])
    _run([str(vpy), *_PIP, "--no-build-isolation", "-e", ".[test]"])
    _run([str(vpy), "-c", "import jetstream_sync as j; assert j.__impl__ == 'c', j.__impl__"])
    stamp.write_text(digest)


def run_suite(venv: Path, full: bool) -> int:
    """Run pytest in ``venv`` from the repository root; return its exit status (5 counts as 1).

    Args:
        venv: the venv to run in (its ``bin`` goes first on ``PATH``).
        full: run the whole suite, not the suite minus ``QUICK_SKIPS``.

    Returns:
        pytest's exit status, with "no tests collected" turned into a failure.
    """
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONHOME", "PYTHONPATH"}}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    workers = os.environ.get("TEST_WORKERS", "4")
    xdist = ["-n", workers, "--dist", "loadgroup"]  # as make suite (tests/fixtures/workers.py)
    argv = [str(venv / "bin" / "python"), "-m", "pytest", *xdist, *([] if full else QUICK_SKIPS)]
    print("+", " ".join(argv), flush=True)
    status = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
    return 1 if status == 5 else status


def check_version(version: str, full: bool) -> Outcome:
    """Find, install and test one version.

    Args:
        version: ``X.Y``.
        full: run the whole suite.

    Returns:
        What happened.
    """
    outcome = Outcome(version, find_python(version))
    if outcome.python is None:
        print(f"== Python {version}: skipped, no python{version} found", flush=True)
        return outcome
    print(f"== Python {version}: {outcome.python}", flush=True)
    started = time.monotonic()
    try:
        ensure_venv(outcome.python, ROOT / f".venv-{version}")
    except subprocess.CalledProcessError as exc:
        outcome.status = f"install failed ({exc.returncode})"
        return outcome
    finally:
        outcome.install_s = time.monotonic() - started
    started, cpu = time.monotonic(), _children_cpu()
    status = run_suite(ROOT / f".venv-{version}", full)
    outcome.test_s = time.monotonic() - started
    outcome.test_cpu_s = _children_cpu() - cpu
    outcome.status = "passed" if status == 0 else f"failed (pytest exit {status})"
    return outcome


def _children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str]) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> int:
    """Test every requested version; return 1 if a found one failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="X.Y versions (default: the classifiers)")
    parser.add_argument("--full", action="store_true", help="run the whole suite on each")
    parser.add_argument(
        "--not-default", action="store_true", help="leave out this interpreter's version"
    )
    args = parser.parse_args(argv)
    versions = args.versions or classified_versions()
    default = "{}.{}".format(*sys.version_info[:2])
    left_out = args.not_default and default in versions
    outcomes = [check_version(v, args.full) for v in versions if not (left_out and v == default)]
    selection = "the whole suite" if args.full else "the suite minus " + " ".join(QUICK_SKIPS)
    print(f"\ntest-pythons ({selection}):")
    if left_out:
        print(f"  {default}  left out: the default interpreter's version (make test runs it)")
    for outcome in outcomes:
        print(outcome.line())
    failed = [o for o in outcomes if o.python is not None and o.status != "passed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
