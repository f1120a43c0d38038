"""Key-Value and Object Store sit on top of JetStream: they wrap a context by its public API."""

from __future__ import annotations

import ast
from pathlib import Path

import jetstream_sync
from jetstream_sync import JetStreamContext

ROOT = Path(jetstream_sync.__file__).parent
_UPPER = ("jetstream_sync.kv", "jetstream_sync.object_store")


def _module_level_imports(path: Path) -> set[str]:
    """Modules imported by ``path`` outside functions (``TYPE_CHECKING`` blocks left out)."""
    package = "jetstream_sync.jetstream"
    found: set[str] = set()
    todo: list[ast.AST] = list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            name = ".".join(p for p in (base, node.module) if p)
            found.update(f"{name}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ClassDef | ast.If | ast.Try | ast.With):
            todo.extend(ast.iter_child_nodes(node))
    return found


def test_jetstream_imports_neither_kv_nor_object_store_when_loaded():
    """No module of jetstream/ imports kv/ or object_store/ at load time; the context's
    classes come from JetStream alone (the bucket calls go to the room each registers)."""
    for path in sorted((ROOT / "jetstream").glob("*.py")):
        upward = {m for m in _module_level_imports(path) if m.startswith(_UPPER)}
        assert not upward, f"{path.name} imports {sorted(upward)}"
    foreign = [c.__module__ for c in JetStreamContext.__mro__ if c.__module__.startswith(_UPPER)]
    assert foreign == []
    for room in ("kv", "object_store"):
        for path in (ROOT / room).glob("*.py"):
            assert "type: ignore[attr-defined" not in path.read_text(), path


def test_api_prefix_is_public(nc):
    """JetStreamContext.api_prefix: the default, a domain's and a custom prefix."""
    assert nc.jetstream().api_prefix == "$JS.API"
    assert nc.jetstream(domain="hub").api_prefix == "$JS.hub.API"
    assert nc.jetstream(prefix="imported.js").api_prefix == "imported.js"
