"""cffi builder of ``jetstream_sync._ffi`` (out-of-line, API mode).

Used by ``setup.py`` (``cffi_modules``) with the repository root as the
current directory, or run as a script to build in place or elsewhere::

    python jetstream_sync/_build_ffi.py            # next to the sources
    python jetstream_sync/_build_ffi.py /tmp/out   # /tmp/out/jetstream_sync/_ffi*.so

Extra compiler and linker flags (the sanitizer build) come from the
``JETSTREAM_SYNC_CFLAGS`` environment variable, split like a shell would.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import cffi

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
HEADER = CSRC / "jss_proto.h"  # the public interface: cdef reads it
SOURCES = sorted(CSRC.glob("*.c"))  # one file per job, see csrc/README.md
HEADERS = sorted(CSRC.glob("*.h"))


def cdef_text(header: Path = HEADER) -> str:
    """Return the header's declarations without preprocessor lines, as cdef wants them.

    Args:
        header: the C header to read.

    Returns:
        The header text with every line starting with ``#`` removed.
    """
    lines = header.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def _extra_flags() -> list[str]:
    return shlex.split(os.environ.get("JETSTREAM_SYNC_CFLAGS", ""))


def make_builder(absolute_paths: bool) -> cffi.FFI:
    """Return an FFI builder for ``jetstream_sync._ffi``.

    Args:
        absolute_paths: name the C sources by absolute path (needed by
            ``FFI.compile``, which runs in its tmpdir) instead of relative to
            the repository root (what setuptools wants).

    Returns:
        The configured builder of every ``csrc/*.c`` (each rebuilt when a
        ``csrc/*.h`` changes); flags from ``JETSTREAM_SYNC_CFLAGS`` are
        appended to both the compile and the link command.
    """

    def path(p: Path) -> str:
        return str(p) if absolute_paths else p.relative_to(ROOT).as_posix()

    builder = cffi.FFI()
    builder.cdef(cdef_text())
    builder.set_source(
        "jetstream_sync._ffi",
        '#include "jss_proto.h"',
        sources=[path(source) for source in SOURCES],
        depends=[path(header) for header in HEADERS],
        include_dirs=[path(CSRC)],
        extra_compile_args=["-O2", "-std=c99", *_extra_flags()],
        extra_link_args=_extra_flags(),
    )
    return builder


ffibuilder = make_builder(absolute_paths=Path.cwd().resolve() != ROOT)


if __name__ == "__main__":
    out_dir = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    print(make_builder(absolute_paths=True).compile(tmpdir=str(out_dir), verbose=True))
