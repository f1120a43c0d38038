"""Public names: every error class is exported and documented; defaults live in _defaults.py."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import jetstream_sync
from jetstream_sync import _defaults, errors

ROOT = Path(jetstream_sync.__file__).parent
DOCS = ROOT.parent / "docs" / "errors.md"


def _package_modules() -> list:
    names = [
        info.name
        for info in pkgutil.walk_packages(jetstream_sync.__path__, "jetstream_sync.")
        if ".spark" not in info.name and not info.name.endswith("_build_ffi")
    ]
    return [importlib.import_module(name) for name in names]


def _error_classes(module) -> list[type]:
    return [
        obj
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    ]


def test_every_class_in_errors_is_exported_from_the_top():
    """Each exception class of errors.py is ``jetstream_sync.X`` and listed in __all__."""
    classes = _error_classes(errors)
    assert len(classes) > 30
    for cls in classes:
        assert getattr(jetstream_sync, cls.__name__, None) is cls, cls.__name__
        assert cls.__name__ in jetstream_sync.__all__, cls.__name__


def test_every_public_nats_error_anywhere_is_exported():
    """A NatsError subclass defined in any module (not only errors.py) is exported at the top."""
    missing = [
        f"{cls.__module__}.{cls.__name__}"
        for module in _package_modules()
        for cls in _error_classes(module)
        if issubclass(cls, jetstream_sync.NatsError)
        and getattr(jetstream_sync, cls.__name__, None) is not cls
    ]
    assert not missing


def test_every_exported_error_is_documented():
    """docs/errors.md names every exception class the package exports."""
    text = DOCS.read_text()
    documented = set(re.findall(r"`(\w+Error)`", text))
    exported = {
        name
        for name in jetstream_sync.__all__
        if inspect.isclass(getattr(jetstream_sync, name))
        and issubclass(getattr(jetstream_sync, name), BaseException)
    }
    assert exported - documented == set()


# Parameters whose default belongs in _defaults.py, never a literal in a signature.
DEFAULTED = {
    "servers", "connect_timeout", "max_reconnect_attempts", "reconnect_time_wait",
    "reconnect_jitter", "reconnect_buf_size", "ping_interval", "max_outstanding_pings",
    "inbox_prefix", "pending_msgs_limit", "pending_bytes_limit", "timeout", "max_ack_inflight",
    "ack_timeout", "batch", "max_messages", "expires", "max_msgs", "retry_attempts",
}  # fmt: skip


def test_no_literal_defaults_in_signatures():
    """Timeouts, limits and batch sizes default to a _defaults.py name, not a literal."""
    found = []
    for path in ROOT.rglob("*.py"):
        # The dev-server launcher (testing/) is a tool with its own knobs, not the client API.
        skip = {"_protocol", "testing"} & set(path.relative_to(ROOT).parts)
        if skip or path.name in ("_build_ffi.py", "_defaults.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            positional = args.posonlyargs + args.args
            tail = positional[len(positional) - len(args.defaults) :]
            pairs = list(zip(tail, args.defaults, strict=True))
            kw = zip(args.kwonlyargs, args.kw_defaults, strict=True)
            pairs += [(a, d) for a, d in kw if d is not None]
            for arg, default in pairs:
                literal = isinstance(default, ast.BinOp) or (
                    isinstance(default, ast.Constant) and default.value is not None
                )
                if arg.arg in DEFAULTED and literal:
                    found.append(f"{path.name}:{node.lineno} {node.name}({arg.arg}=...)")
    assert not found


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_defaults_are_the_contracts():
    """The public defaults are those of the API contract (and come from _defaults.py)."""
    from jetstream_sync.jetstream.consumer import Consumer
    from jetstream_sync.jetstream.context import JetStreamContext

    client = {
        "connect_timeout": 2.0, "max_reconnect_attempts": 60, "reconnect_time_wait": 2.0,
        "reconnect_jitter": 0.1, "reconnect_buf_size": 8 * 1024 * 1024, "ping_interval": 120.0,
        "max_outstanding_pings": 2, "inbox_prefix": "_INBOX", "pending_msgs_limit": 512 * 1024,
        "pending_bytes_limit": 256 * 1024 * 1024,
    }  # fmt: skip
    for name, value in client.items():
        assert _default(jetstream_sync.Client, name) == value, name
    assert _default(jetstream_sync.connect, "servers") == "nats://127.0.0.1:4222"
    assert _default(jetstream_sync.Client.request, "timeout") == 1.0
    assert _default(jetstream_sync.Subscription.next_msg, "timeout") == 1.0
    assert _default(JetStreamContext, "timeout") == 5.0
    assert _default(JetStreamContext, "max_ack_inflight") == 5000
    assert _default(JetStreamContext, "ack_timeout") == 30.0
    assert _default(Consumer.fetch, "batch") == 1 and _default(Consumer.fetch, "timeout") == 5.0
    assert _default(Consumer.messages, "max_messages") == 500
    assert _default(Consumer.messages, "expires") == 30.0
    assert _defaults.JS_TIMEOUT == 5.0
