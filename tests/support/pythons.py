"""Find the CPython interpreters of given minor versions on this machine.

Looked for, in order: pyenv (``PYENV_VERSION=<v> pyenv which pythonX.Y`` for
each installed ``X.Y.*``, newest first), the pyenv versions directory
(``$PYENV_ROOT/versions``, default ``~/.pyenv/versions``) when the ``pyenv``
command is not on ``PATH``, then ``pythonX.Y`` on ``PATH``. A candidate counts
only if it runs, reports that version and can create a venv with pip
(``ensurepip``; Debian's ``python3.X`` lacks it without ``python3.X-venv``).
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)$")
_PROBE = "import ensurepip, sys, venv; print('%d.%d' % sys.version_info[:2])"


def classified_versions(setup_cfg: Path = ROOT / "setup.cfg") -> list[str]:
    """Return the ``X.Y`` versions that setup.cfg's classifiers say are tested.

    Args:
        setup_cfg: the setup.cfg to read.

    Returns:
        The versions of the ``Programming Language :: Python :: 3.X``
        classifiers, in file order.
    """
    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    lines = parser.get("metadata", "classifiers", fallback="").splitlines()
    return [m[1] for line in lines if (m := _CLASSIFIER.match(line.strip()))]


def find_python(version: str) -> Path | None:
    """Return an interpreter of ``version`` (``"3.12"``) that can make venvs, or None.

    Args:
        version: a ``major.minor`` version.

    Returns:
        The first working candidate (see the module docstring), or None if
        there is none.
    """
    for candidate in _candidates(version):
        if _reports(candidate, version):
            return candidate
    return None


def _candidates(version: str) -> Iterator[Path]:
    pyenv = shutil.which("pyenv")
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    if pyenv is not None:
        root = Path(_output([pyenv, "root"]) or root)
    for installed in _pyenv_installs(root, version):
        if pyenv is not None:
            env = {**os.environ, "PYENV_VERSION": installed}
            found = _output([pyenv, "which", f"python{version}"], env=env)
            if found:
                yield Path(found)
        else:
            yield root / "versions" / installed / "bin" / f"python{version}"
    on_path = shutil.which(f"python{version}")
    if on_path is not None:
        yield Path(on_path)


def _pyenv_installs(root: Path, version: str) -> list[str]:
    """The pyenv installs ``X.Y.Z`` of ``version``, newest first (no -dev or t builds)."""
    pattern = re.compile(rf"{re.escape(version)}\.(\d+)$")
    versions = root / "versions"
    names = [p.name for p in versions.iterdir()] if versions.is_dir() else []
    matches = [(int(m[1]), name) for name in names if (m := pattern.match(name))]
    return [name for _, name in sorted(matches, reverse=True)]


def _reports(python: Path, version: str) -> bool:
    """Whether ``python`` runs, is ``version`` and has ensurepip."""
    return _output([str(python), "-c", _PROBE]) == version


def _output(argv: list[str], env: dict[str, str] | None = None) -> str | None:
    """The stripped stdout of ``argv``, or None if it cannot run or fails."""
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None
