"""The typed API: ``py.typed`` and the cffi stub ship with the package; public names are annotated.

``mypy --strict jetstream_sync`` itself runs in ``make typecheck`` (part of ``make test``).
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jetstream_sync
import jetstream_sync.spark
import jetstream_sync.testing
import jetstream_sync.testing.plugin

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_MODULES = (jetstream_sync, jetstream_sync.testing, jetstream_sync.spark)


def test_py_typed_is_in_the_package_directory() -> None:
    """The imported package's directory holds py.typed and the stub of the C module."""
    package = Path(jetstream_sync.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "_ffi.pyi").is_file()


def test_the_build_ships_py_typed_and_the_stub(tmp_path: Path) -> None:
    """setuptools' build_py (what a wheel is made from) copies py.typed and _ffi.pyi."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    built = tmp_path / "jetstream_sync"
    assert (built / "client.py").is_file()
    assert (built / "py.typed").is_file()
    assert (built / "_ffi.pyi").is_file()


def _own(obj: object) -> bool:
    """Whether ``obj`` is defined by jetstream_sync (not inherited from the stdlib or attrs)."""
    return str(getattr(obj, "__module__", "") or "").startswith("jetstream_sync")


def _functions(name: str, obj: object) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(qualified name, function)`` for a public function, or a class's public methods."""
    if inspect.isclass(obj):
        for attr, value in vars(obj).items():
            if attr.startswith("_") and attr not in ("__init__", "__call__"):
                continue
            if isinstance(value, property):
                if value.fget is not None:
                    yield f"{name}.{attr}", value.fget
            elif isinstance(value, staticmethod | classmethod):
                yield f"{name}.{attr}", value.__func__
            elif inspect.isfunction(value) and _own(value):
                yield f"{name}.{attr}", value
        for base in obj.__mro__[1:]:  # public methods inherited from the package's own bases
            if _own(base) and not base.__name__.startswith("_"):
                continue  # a public base: checked as a name of its own when exported
            if _own(base):
                yield from _functions(f"{name}({base.__name__})", base)
    elif inspect.isfunction(obj) and _own(obj):
        yield name, obj


def unannotated(name: str, obj: object) -> list[str]:
    """What lacks an annotation: parameters (not self/cls/*args/**kwargs) and return values."""
    missing = []
    for qualname, func in _functions(name, obj):
        sig = inspect.signature(func)
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{qualname}: return")
        for i, param in enumerate(sig.parameters.values()):
            if i == 0 and param.name in ("self", "cls"):
                continue
            if param.annotation is inspect.Parameter.empty:
                missing.append(f"{qualname}: parameter {param.name}")
    return missing


def _public(module: ModuleType) -> Iterator[tuple[str, object]]:
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield f"{module.__name__}.{name}", obj


def test_every_public_name_is_annotated() -> None:
    """Every function and public method reachable from the public modules' __all__ is typed."""
    names = [pair for module in PUBLIC_MODULES for pair in _public(module)]
    assert len(names) > 100  # the whole surface, not an empty list
    missing = [m for name, obj in names for m in unannotated(name, obj)]
    assert missing == []


def test_the_pytest_fixtures_are_annotated() -> None:
    """The plugin's fixtures (what users' tests receive) declare their types."""
    fixtures = {
        name: value.__wrapped__  # pytest wraps a fixture's function
        for name, value in vars(jetstream_sync.testing.plugin).items()
        if hasattr(value, "_fixture_function_marker")
    }
    assert {"nats_server", "nats_client", "jetstream"} <= set(fixtures)
    for name, func in fixtures.items():
        assert unannotated(name, func) == []


def test_the_check_finds_what_is_missing() -> None:
    """The annotation check itself reports a bare parameter, a bare return and a bare property."""

    class Sample:
        def typed(self, x: int) -> int:
            return x

        def bare(self, x, y: int):  # type: ignore[no-untyped-def]
            return x

        @property
        def prop(self):  # type: ignore[no-untyped-def]
            return 1

    Sample.__module__ = "jetstream_sync.sample"
    for value in vars(Sample).values():
        if inspect.isfunction(value):
            value.__module__ = "jetstream_sync.sample"
    assert unannotated("Sample", Sample) == [
        "Sample.bare: return",
        "Sample.bare: parameter x",
        "Sample.prop: return",
    ]
