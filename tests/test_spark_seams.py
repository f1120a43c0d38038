"""spark/ imports public modules and only the internal seams its package docstring lists."""

from __future__ import annotations

import re

import jetstream_sync.spark
from tests.test_layering import MODULES, _imports

SEAMS = set(re.findall(r"``(jetstream_sync\.[\w.]+)``", jetstream_sync.spark.__doc__ or ""))


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _room(module: str) -> str:
    """``_protocol`` and ``jetstream`` are rooms of their own; the other modules are the core."""
    top = module.split(".")[1]
    return top if top in ("_protocol", "jetstream") else "core"


def test_the_documented_seams_are_one_per_lower_room():
    """The docstring names one seam each for the protocol core, the client core and JetStream."""
    rooms = [_room(seam) for seam in SEAMS]
    assert sorted(rooms) == ["_protocol", "core", "jetstream"]


def test_spark_imports_no_other_private_module():
    """Every private module spark/ imports (type-only imports aside) is a documented seam."""
    reached = {
        (name, target)
        for name, path in MODULES.items()
        if name.startswith("jetstream_sync.spark")
        for target in _imports(name, path)
        if not target.startswith("jetstream_sync.spark") and _private(target)
    }
    assert {(name, target) for name, target in reached if target not in SEAMS} == set()
