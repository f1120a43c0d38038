"""The package's module graph: no import cycles, not even through imports inside functions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import jetstream_sync

ROOT = Path(jetstream_sync.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py") if p.name != "_build_ffi.py"}


def _from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in ``module`` names, relative dots resolved."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _targets(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    name = _from(module, is_package, node)
    return [f"{name}.{a.name}" if f"{name}.{a.name}" in MODULES else name for a in node.names]


def _imports(module: str, path: Path) -> set[str]:
    """Every package module ``module`` imports at run time (``TYPE_CHECKING`` blocks skipped)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom):
            found.update(t for t in _targets(module, is_package, node) if t in MODULES)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        todo.extend(ast.iter_child_nodes(node))
    found.discard(module)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


APPLICATION_LAYERS = {"testing", "spark", "cli"}


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (``start`` included)."""
    seen = {start}
    todo = [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_cycle_finder_finds_a_cycle():
    """The checker itself reports a cycle made through a function-level import."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it back."""
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    # The package's __init__ imports every core module, and those never import it. The layers
    # built on the public API (testing, spark, cli) import the package; it never imports them.
    core = _reachable(graph, "jetstream_sync") - {"jetstream_sync"}
    assert not [name for name in core if "jetstream_sync" in graph[name]]
    assert not [name for name in core if name.split(".")[1] in APPLICATION_LAYERS]
    del graph["jetstream_sync"]
    for deps in graph.values():
        deps.discard("jetstream_sync")
    assert _cycle(graph) is None


def test_consumer_admin_split_by_job():
    """consumer management, its stream/context delegation and the nats.py entry points are apart."""
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    admin = graph["jetstream_sync.jetstream.consumer_admin"]
    assert "jetstream_sync.jetstream.ordered" not in admin
    assert "jetstream_sync.jetstream.stream" not in admin
    assert "jetstream_sync.jetstream.compat" not in admin
    manager = graph["jetstream_sync.jetstream.consumer_manager"]
    assert "jetstream_sync.jetstream.push" not in manager
    assert "jetstream_sync.jetstream.compat" not in manager


# What Subscription and Msg keep to themselves (their public methods stand in front).
PRIVATE = {"_queue", "_raw_headers", "_parsed", "_ackd", "_received", "_max", "_worker"}
ENGINE = ["_pull", "_pull_stream", "ordered", "push", "consumer", "compat", "consumer_admin"]


def test_pull_engine_uses_only_the_public_seams_of_subscription_and_msg():
    """The pull/push engines and the ordered consumer read no private field of Subscription/Msg."""
    for name in ENGINE:
        path = MODULES[f"jetstream_sync.jetstream.{name}"]
        used = {
            node.attr
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE
        }
        assert not used, f"{path.name} reaches into {sorted(used)}"


def test_ordered_policy_is_not_in_the_generic_iterator():
    """MessageIterator has no ``ordered`` switch; the ordered consumer is a layer over it."""
    import inspect

    from jetstream_sync.jetstream import _pull_stream

    assert "ordered" not in inspect.signature(_pull_stream.MessageIterator).parameters
    assert not hasattr(_pull_stream, "_Reset")


# ---------------------------------------------------------------------------- rooms (issue 17)

UPPER_ROOMS = {"jetstream", "kv", "spark", "cli", "testing", "object_store", "opentelemetry"}


def _room(module: str) -> str:
    """The room of a module: its subpackage (``jetstream``, ``kv``, ``_protocol``,
    ``_connection``...), else ``core`` (``jetstream_sync.client``, ``jetstream_sync.msg``...)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    if len(parts) > 2 or MODULES[module].name == "__init__.py":
        return parts[1]
    return "core"


def _every_import(module: str, path: Path) -> set[str]:
    """Every package module ``module`` imports: at run time, in functions or for type checks."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.update(t for t in _targets(module, is_package, node) if t in MODULES)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
    found.discard(module)
    return found


# The floors below JetStream: the modules at the top of the package, the socket owner's room
# and the protocol core.
LOWER_ROOMS = ("core", "_connection", "_protocol")
# The one way down from the core into JetStream: Client.jetstream() builds a context lazily
# (and names its type for the checker).
CORE_DELEGATORS = {("jetstream_sync.client", "jetstream_sync.jetstream.context")}


def test_core_imports_no_upper_room():
    """The core (client, msg, _connection/, _protocol/...) imports nothing from the rooms above."""
    found = [
        (name, dep)
        for name, path in MODULES.items()
        if _room(name) in LOWER_ROOMS
        for dep in _every_import(name, path)
        if _room(dep) in UPPER_ROOMS and (name, dep) not in CORE_DELEGATORS
    ]
    assert not found, f"core modules import upper rooms: {found}"


def _private_client_reads(tree: ast.AST) -> set[str]:
    """``client._x``, ``self._client._x`` and the like: private attributes read off a client."""
    used = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        owner = node.value
        named = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if named.lstrip("_") == "client":
            used.add(node.attr)
    return used


def test_msg_touches_no_private_attribute_of_its_client():
    """msg.py answers through the client's one seam (send_reply): no ``client._*`` read."""
    tree = ast.parse(MODULES["jetstream_sync.msg"].read_text())
    assert _private_client_reads(ast.parse("client._writer; self._client._closed")) == {
        "_writer",
        "_closed",
    }  # the checker sees both shapes
    assert not _private_client_reads(tree)


def _bases(module: str, path: Path) -> list[tuple[str, str, str]]:
    """``(class, base, module the base comes from)`` for every class of ``module``; a base
    written ``module.Name`` comes from the module that name was imported as."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    origin: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias, target in zip(node.names, _targets(module, is_package, node), strict=True):
                origin[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                origin[alias.asname or alias.name] = alias.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Name):
                    found.append((node.name, base.id, origin.get(base.id, module)))
                elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
                    owner = base.value.id
                    found.append((node.name, base.attr, origin.get(owner, owner)))
    return found


def _is_mixin(base: str, source: str) -> bool:
    """A base is a mixin when its name ends in ``Mixin`` or its module is named for mixins
    (``consumer_mixins.py``), whatever the class is called."""
    return base.endswith("Mixin") or "mixin" in source.rsplit(".", 1)[-1].lower()


def _mixins(modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    return [
        (f"{name}.{cls}", base, source)
        for name, path in modules.items()
        for cls, base, source in _bases(name, path)
        if _is_mixin(base, source)
    ]


def test_no_core_class_is_assembled_from_mixins():
    """Client holds its Connection: no core class inherits a mixin (composition, not mixins)."""
    core = {name: path for name, path in MODULES.items() if _room(name) in LOWER_ROOMS}
    assert not _mixins(core)


def test_no_class_inherits_a_mixin_from_another_room():
    """A class lives in one room: its mixins, if any, come from the same room."""
    crossing = [
        (cls, base, source)
        for cls, base, source in _mixins(MODULES)
        if _room(source) != _room(cls.rsplit(".", 1)[0])
    ]
    assert not crossing, f"classes inheriting another room's mixin: {crossing}"


def test_the_jetstream_room_is_built_by_composition():
    """No class of jetstream/ inherits a mixin (issue 29): Stream and JetStreamContext declare
    their consumer and nats.py subscribe methods and hand them to the ConsumerManager they
    hold and to compat.py's functions; fails on the code before, built from consumer_mixins.py."""
    room = {name: path for name, path in MODULES.items() if _room(name) == "jetstream"}
    assert len(room) > 20
    found = _mixins(room)
    assert not found, f"jetstream/ classes built from mixins (hold the helper instead): {found}"


def test_the_mixin_check_sees_every_way_of_naming_a_mixin(tmp_path):
    """The check above sees a base named ``...Mixin`` (imported, reached through its module or
    local), any base imported from a mixin module, and lets plain and abstract bases be."""
    here = "jetstream_sync.jetstream.stream"
    mixins = "jetstream_sync.jetstream.consumer_mixins"
    cases = {
        "from .consumer_mixins import StreamConsumersMixin\n"
        "class Stream(StreamConsumersMixin): ...\n": [
            (f"{here}.Stream", "StreamConsumersMixin", mixins)
        ],
        "from .consumer_mixins import _Admin\nclass Stream(_Admin): ...\n": [
            (f"{here}.Stream", "_Admin", mixins)
        ],
        "from . import compat\nclass Ctx(compat.CompatSubscribeMixin): ...\n": [
            (f"{here}.Ctx", "CompatSubscribeMixin", "jetstream_sync.jetstream.compat")
        ],
        "class Ctx(SubscribeMixin): ...\n": [(f"{here}.Ctx", "SubscribeMixin", here)],
        "import abc\nclass BaseMessageIterator(abc.ABC): ...\n": [],
        "from ._pull_stream import BaseMessageIterator\nclass It(BaseMessageIterator): ...\n": [],
        "class Stream:\n    name: str\n": [],
    }
    path = tmp_path / "stream.py"
    for source, expected in cases.items():
        path.write_text(source)
        assert _mixins({here: path}) == expected, source


# The rooms on top: each imports the package's public modules and, of each lower room, at
# most one internal seam, named in its package docstring as ``jetstream_sync.<module>``.
APPLICATION_ROOMS = ("kv", "object_store", "spark", "cli", "testing", "opentelemetry")
# Key-Value and Object Store attach themselves to the context (issue 29): kv.register() and
# object_store.register(), which jetstream_sync/__init__.py calls, hand jetstream/_rooms.py the
# module that does the context's bucket work. What jetstream/ keeps of them is their public
# names, read by the type checker alone for the signatures of the context's bucket methods.
TYPE_ONLY_NAMES = {
    "jetstream_sync.jetstream.context": {"jetstream_sync.kv", "jetstream_sync.object_store"},
    "jetstream_sync.jetstream._rooms": {"jetstream_sync.kv", "jetstream_sync.object_store"},
}


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _seams(room: str) -> set[str]:
    """The internal modules ``room``'s package docstring names as its seams."""
    doc = ast.get_docstring(ast.parse(MODULES[f"jetstream_sync.{room}"].read_text())) or ""
    return {name for name in re.findall(r"``(jetstream_sync\.[\w.]+)``", doc) if _private(name)}


@pytest.mark.parametrize("room", APPLICATION_ROOMS)
def test_an_upper_room_names_at_most_one_seam_per_lower_room(room):
    """Each seam an upper room names is a module of a lower room, one per room at most."""
    rooms = [_room(seam) for seam in _seams(room)]
    assert all(seam in MODULES for seam in _seams(room))
    assert len(rooms) == len(set(rooms)), f"{room} names two seams of one room: {_seams(room)}"
    assert room not in rooms and not set(rooms) & set(APPLICATION_ROOMS)


@pytest.mark.parametrize("room", APPLICATION_ROOMS)
def test_an_upper_room_imports_no_private_module_but_its_seams(room):
    """kv/, object_store/, spark/, cli/, testing/: every private module of another room they
    import (at run time, in functions or for type checks) is a seam their docstring names."""
    seams = _seams(room)
    found = sorted(
        (name, dep)
        for name, path in MODULES.items()
        if _room(name) == room
        for dep in _every_import(name, path)
        if _room(dep) != room and _private(dep) and dep not in seams
    )
    assert not found, f"{room} imports private modules that are not its seams: {found}"


def test_the_seam_check_sees_a_private_import():
    """The checks above would catch kv/ importing jetstream/_api.py directly."""
    assert _private("jetstream_sync.jetstream._api")
    assert not _private("jetstream_sync.jetstream.stream")
    assert _room("jetstream_sync.jetstream._seam") == "jetstream"
    assert _room("jetstream_sync._seam") == "core"
    assert _seams("kv") == {
        "jetstream_sync._protocol",
        "jetstream_sync._seam",
        "jetstream_sync.jetstream._seam",
    }


def test_spark_imports_nothing_of_the_protocol_core():
    """The Spark writer publishes through the JetStream room's publish_arrow (issue 29): spark/
    names no seam of the protocol core, so the seam check above refuses any import of it."""
    assert _seams("spark") == {"jetstream_sync._seam"}


def _reaches_up(module: str, path: Path) -> list[str]:
    """What a module of jetstream/ imports of the rooms above it (or of the package, which
    re-exports them): at run time, in a function, or for the type checker, but for the public
    names ``TYPE_ONLY_NAMES`` gives it."""
    run_time = _imports(module, path)
    type_only = _every_import(module, path) - run_time
    allowed = TYPE_ONLY_NAMES.get(module, set())
    above = {dep for dep in run_time | type_only if _room(dep) in APPLICATION_ROOMS + ("package",)}
    return sorted(dep for dep in above if dep in run_time or dep not in allowed)


def test_jetstream_imports_no_room_above_it():
    """jetstream/ imports no room above it; for types, kv/ and object_store/'s public names."""
    found = [
        (name, dep)
        for name, path in sorted(MODULES.items())
        if _room(name) == "jetstream"
        for dep in _reaches_up(name, path)
    ]
    assert not found, f"jetstream/ imports the rooms above it: {found}"


def test_the_room_check_sees_every_kind_of_import(tmp_path):
    """The check above sees imports at run time, in functions, for types and via the package."""
    path = tmp_path / "context.py"
    cases = {
        "from ..kv import manager\n": ["jetstream_sync.kv.manager"],
        "import jetstream_sync.object_store\n": ["jetstream_sync.object_store"],
        "def f():\n    from ..object_store import admin\n": ["jetstream_sync.object_store.admin"],
        "if TYPE_CHECKING:\n    from ..kv.bucket import KeyValue\n": ["jetstream_sync.kv.bucket"],
        "if TYPE_CHECKING:\n    from .. import KeyValue\n": ["jetstream_sync"],
        "import jetstream_sync.cli\n": ["jetstream_sync.cli"],
        "if TYPE_CHECKING:\n    from ..kv import KeyValue\n": [],
        "from .. import _defaults\n": [],
    }
    for source, expected in cases.items():
        path.write_text(source)
        assert _reaches_up("jetstream_sync.jetstream.context", path) == expected, source
    path.write_text("if TYPE_CHECKING:\n    from ..kv import KeyValue\n")
    assert _reaches_up("jetstream_sync.jetstream.stream", path) == ["jetstream_sync.kv"]


def test_kv_and_object_store_attach_on_import():
    """``import jetstream_sync`` registers the rooms the context's bucket methods call."""
    from jetstream_sync.jetstream._rooms import ROOMS
    from jetstream_sync.kv import manager
    from jetstream_sync.object_store import admin

    assert ROOMS.key_value is manager
    assert ROOMS.object_store is admin


TESTS = Path(__file__).parent
_TEST_MODULE_IMPORT = re.compile(r"^\s*(?:from|import) tests\.[\w.]*\btest_\w+", re.MULTILINE)


def test_no_test_module_imports_another():
    """Helpers shared by tests live in tests/fixtures/, never in another test module."""
    offenders = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if _TEST_MODULE_IMPORT.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_test_import_check_sees_an_import():
    """The check above matches both import forms and leaves fixtures alone."""
    assert _TEST_MODULE_IMPORT.search("from tests.core.test_x import Helper\n")
    assert _TEST_MODULE_IMPORT.search("    import tests.kv.test_y\n")
    assert not _TEST_MODULE_IMPORT.search("from tests.fixtures.stall import CHUNK\n")


# -------------------------------------------------------------------- the socket owner (issue 29)

SOCKET_OWNER = "jetstream_sync._connection"
# Its parts, one module each, in one room: the owner (connection) and what it alone uses.
SOCKET_OWNER_PARTS = (
    "connection", "transport", "handshake", "reader", "read_role", "read_buffer",
    "writer", "pings", "request_mux", "sub_table", "wait",
)  # fmt: skip


def _in_the_room(module: str) -> bool:
    return module.startswith(f"{SOCKET_OWNER}.")


def _misplaced_parts(modules: list[str]) -> list[str]:
    """Modules of the core floor named for a part of the socket owner, with or without a
    leading underscore: a part living outside its room."""
    return sorted(
        name
        for name in modules
        if name.count(".") == 1
        and name != SOCKET_OWNER
        and name.rsplit(".", 1)[1].lstrip("_") in SOCKET_OWNER_PARTS
    )


def _room_imports(module: str, path: Path) -> tuple[set[str], set[str]]:
    """What ``module`` takes from the socket owner's room: the room's modules it imports (at
    run time, in functions or for type checks), and the names it imports from the package."""
    is_package = path.name == "__init__.py"
    modules: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            modules.update(t for t in _targets(module, is_package, node) if _in_the_room(t))
            if _from(module, is_package, node) == SOCKET_OWNER:
                names.update(
                    a.name for a in node.names if f"{SOCKET_OWNER}.{a.name}" not in MODULES
                )
        elif isinstance(node, ast.Import):
            modules.update(a.name for a in node.names if _in_the_room(a.name))
    return modules, names


def _taken_from_the_room() -> dict[str, set[str]]:
    """The names each module outside the room imports from the room's package."""
    found = {}
    for name, path in MODULES.items():
        if name != SOCKET_OWNER and not _in_the_room(name):
            names = _room_imports(name, path)[1]
            if names:
                found[name] = names
    return found


def test_the_socket_owner_s_parts_live_in_one_room():
    """jetstream_sync/_connection/ holds the socket owner's parts and nothing else, its
    package docstring names each of them, and no module of the core floor is named for one."""
    assert _misplaced_parts(list(MODULES)) == []
    room = sorted(name for name in MODULES if _in_the_room(name))
    assert room == sorted(f"{SOCKET_OWNER}.{part}" for part in SOCKET_OWNER_PARTS)
    doc = ast.get_docstring(ast.parse(MODULES[SOCKET_OWNER].read_text())) or ""
    assert [part for part in SOCKET_OWNER_PARTS if f"``{part}.py``" not in doc] == []


def test_the_part_check_sees_a_part_outside_the_room():
    """The check above fails on a part left at the top of the package, underscored or not."""
    outside = [f"jetstream_sync._{part}" for part in ("wait", "writer")]  # as they were
    outside.append("jetstream_sync.read_role")
    inside = [SOCKET_OWNER, f"{SOCKET_OWNER}.writer", "jetstream_sync._dispatch"]
    assert _misplaced_parts([*outside, *inside, "jetstream_sync.spark._write"]) == sorted(outside)


def test_the_rest_of_the_package_enters_the_room_by_its_door():
    """Outside jetstream_sync/_connection/, no module imports one of the room's modules, only
    its package; the names they take from it are its __all__, and every one is taken."""
    import importlib

    reaching_in = sorted(
        (name, dep)
        for name, path in MODULES.items()
        if name != SOCKET_OWNER and not _in_the_room(name)
        for dep in _room_imports(name, path)[0]
    )
    assert not reaching_in, f"modules importing the room's modules directly: {reaching_in}"
    taken = set().union(*_taken_from_the_room().values())
    assert taken == set(importlib.import_module(SOCKET_OWNER).__all__)


def test_the_door_check_sees_a_module_reached_into(tmp_path):
    """The check above sees a room module imported relatively, absolutely, as a module or for
    types, and reads the names taken from the package."""
    path = tmp_path / "client.py"
    cases = {
        "from ._connection.writer import Writer\n": ({f"{SOCKET_OWNER}.writer"}, set()),
        "from ._connection import wait\n": ({f"{SOCKET_OWNER}.wait"}, set()),
        "import jetstream_sync._connection.reader\n": ({f"{SOCKET_OWNER}.reader"}, set()),
        "if TYPE_CHECKING:\n    from ._connection.read_role import Ready\n": (
            {f"{SOCKET_OWNER}.read_role"},
            set(),
        ),
        "from ._connection import Connection, Writer\n": (set(), {"Connection", "Writer"}),
    }
    for source, expected in cases.items():
        path.write_text(source)
        assert _room_imports("jetstream_sync.client", path) == expected, source
    path.write_text("if TYPE_CHECKING:\n    from .._connection.read_role import Ready\n")
    assert _room_imports("jetstream_sync.jetstream.context", path)[0] == {
        f"{SOCKET_OWNER}.read_role"
    }


def test_the_wait_mode_is_chosen_in_one_place():
    """_connection/wait.py is a leaf, used only by the socket owner's parts and by the room's
    __init__, which hands the client alone its option check; the package never imports gevent
    or eventlet (it only asks what they patched)."""
    wait = "jetstream_sync._connection.wait"
    assert _imports(wait, MODULES[wait]) <= {"jetstream_sync.errors"}
    users = {module for module, path in MODULES.items() if wait in _imports(module, path)}
    assert users <= {
        "jetstream_sync._connection", "jetstream_sync._connection.connection",
        "jetstream_sync._connection.read_role", "jetstream_sync._connection.writer",
    }  # fmt: skip
    takers = {module for module, names in _taken_from_the_room().items() if "check_choice" in names}
    assert takers == {"jetstream_sync.client"}  # the connect option's check, nowhere else
    greenlet_import = re.compile(r"^\s*(?:import|from)\s+(?:gevent|eventlet)\b", re.MULTILINE)
    assert [m for m, p in MODULES.items() if greenlet_import.search(p.read_text())] == []


# ---------------------------------------------------------------------------- the twin (issue 29)

TWIN = "jetstream_sync._protocol._py"
CSRC = Path(__file__).resolve().parents[1] / "csrc"


def _top_level_names(path: Path) -> list[str]:
    """The names a module's own top-level statements define (imports aside)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def test_the_python_twin_is_split_by_job_as_csrc_is():
    """Each module of _protocol/_py/ names in its docstring the csrc/ file of its job, whose
    name it takes (``jss_<module>.c`` or ``.h``); no name is defined in two of them; the
    package's __init__ only re-exports every public name of its modules (their __all__)."""
    import importlib

    twin = importlib.import_module(TWIN)
    jobs = {n.rsplit(".", 1)[1]: p for n, p in MODULES.items() if n.startswith(f"{TWIN}.")}
    assert len(jobs) >= 9
    exported = ["IMPL"]
    defined: list[str] = []
    for job, path in sorted(jobs.items()):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        mirrored = [f for f in (f"jss_{job}.c", f"jss_{job}.h") if f"csrc/{f}" in doc]
        assert mirrored and (CSRC / mirrored[0]).is_file(), f"{job}.py names no csrc/jss_{job}.*"
        module = importlib.import_module(f"{TWIN}.{job}")  # the module, even named as a function
        names = _top_level_names(path)
        assert sorted(module.__all__) == sorted(n for n in names if not n.startswith("_")), job
        exported += module.__all__
        defined += [n for n in names if n != "__all__"]
        assert all(getattr(twin, name) is getattr(module, name) for name in module.__all__), job
    assert sorted(defined) == sorted(set(defined)), "a name defined by two jobs"
    assert sorted(twin.__all__) == sorted(exported)
    assert sorted(_top_level_names(MODULES[TWIN])) == ["IMPL", "__all__"]


# JetStream's PubAck is the JetStream room's: the client and the socket owner carry a
# reply decoder (``_reply.ReplyDecoder``) the room passes to ``Client.request``, never a
# PubAck switch of their own (issue 29: ``want_puback`` and ``Client.request_pub_ack``).
PUBACK_FREE = ("jetstream_sync.client", SOCKET_OWNER)


def _puback_names(source: str) -> set[str]:
    """The identifiers of ``source`` (names, attributes, arguments, functions) that say
    PubAck."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        for name in (
            getattr(node, "id", None), getattr(node, "attr", None),
            getattr(node, "arg", None), getattr(node, "name", None),
        ):  # fmt: skip
            if isinstance(name, str) and re.search(r"pub_?ack", name, re.IGNORECASE):
                found.add(name)
    return found


def test_the_client_and_the_socket_owner_know_no_puback():
    """client.py and _connection/ name nothing PubAck: what a reply's body is, the JetStream
    room says through the decoder it passes to ``request``."""
    found = {
        name: _puback_names(path.read_text())
        for name, path in MODULES.items()
        if name == PUBACK_FREE[0] or name == SOCKET_OWNER or _in_the_room(name)
    }
    assert {name: names for name, names in found.items() if names} == {}


def test_the_puback_check_sees_a_switch_and_a_method():
    """The check above sees the parameter and the method the client had."""
    source = (
        "class Client:\n"
        "    def request_pub_ack(self, want_puback: bool):\n"
        "        return self.role.round_trip(want_puback=want_puback, fields=PubAck)\n"
    )
    assert _puback_names(source) == {"request_pub_ack", "want_puback", "PubAck"}


# The socket owner's parts, private to the Connection: the client uses its verbs alone.
CONNECTION_PARTS = ("writer", "reader", "pings", "mux", "subs", "pool")


def _connection_reach_ins(source: str) -> set[str]:
    """What ``source`` reads off a connection beyond its verbs: a private attribute or a part,
    through ``self._connection`` or a local named ``connection``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        through = (isinstance(base, ast.Attribute) and base.attr == "_connection") or (
            isinstance(base, ast.Name) and base.id == "connection"
        )
        if through and (node.attr.startswith("_") or node.attr in CONNECTION_PARTS):
            found.add(node.attr)
    return found


def test_the_client_uses_the_connection_s_verbs_alone():
    """client.py reads neither a part of its Connection nor a private attribute (issue 29),
    and the Connection names no part publicly."""
    assert _connection_reach_ins(MODULES["jetstream_sync.client"].read_text()) == set()
    source = MODULES[f"{SOCKET_OWNER}.connection"].read_text()
    public = {m.group(1) for m in re.finditer(r"\bself\.([a-z]\w*)\s*[:=]", source)}
    assert public.isdisjoint(CONNECTION_PARTS), public & set(CONNECTION_PARTS)


def test_the_reach_in_check_sees_a_part_and_a_private_attribute():
    """The check above sees the reach-ins the client had before the verbs."""
    source = (
        "def f(self, connection):\n"
        "    connection.reader.role.lead_until(ready, deadline)\n"
        "    self._connection.pings.forget(waiter)\n"
        "    self._connection._routes.clear()\n"
        "    connection.flush(deadline)\n"
    )
    assert _connection_reach_ins(source) == {"reader", "pings", "_routes"}


# ---------------------------------------------------------------------------- one engine, one role
# (issue 29)


def _modules_naming(attribute: str, owner: str | None = None) -> set[str]:
    """The package modules whose code reads or calls ``<something>.<attribute>`` (with
    ``owner``: ``<owner>.<attribute>``, ``owner`` a plain name)."""
    return {
        name
        for name, path in MODULES.items()
        if any(
            isinstance(node, ast.Attribute)
            and node.attr == attribute
            and (owner is None or (isinstance(node.value, ast.Name) and node.value.id == owner))
            for node in ast.walk(ast.parse(path.read_text()))
        )
    }


def test_replies_are_routed_by_one_engine():
    """Only _routes.ReplyRoute subscribes a client's reply routes: the acks, the batched gets
    and the columnar publishes are its sinks, not engines of their own."""
    assert _modules_naming("add_reply_route") == {"jetstream_sync._routes"}
    assert _modules_naming("add_route") == {"jetstream_sync.client"}  # Client -> Connection


def test_the_socket_is_read_by_the_holder_of_one_role():
    """Only the read role calls the C wait for a reply, and nothing claims the writer: a
    requester holding the role sends through the writer like every other thread."""
    assert _modules_naming("round_trip", "_protocol") == {"jetstream_sync._connection.read_role"}
    assert not {"claim", "unclaim", "claimed"} & set(vars(jetstream_sync._connection.writer.Writer))


def test_the_attribute_finder_sees_a_call(tmp_path, monkeypatch):
    """The finder above reports a module that calls the attribute, and no other."""
    path = tmp_path / "probe.py"
    path.write_text("def f(client):\n    return client.add_reply_route(print)\n")
    monkeypatch.setitem(MODULES, "jetstream_sync.probe", path)
    assert "jetstream_sync.probe" in _modules_naming("add_reply_route")
    assert "jetstream_sync.probe" not in _modules_naming("add_reply_route", "nc")
    path.write_text("add_reply_route = 1\n")
    assert "jetstream_sync.probe" not in _modules_naming("add_reply_route")
