"""The wire codec shared by every config and info class.

Each attrs field carries a :class:`Spec` (its wire key and how its value is
coded) in its metadata; :class:`Wire`, the base of every class, turns specs
into ``from_api`` / ``to_api``. Conversions between float seconds and
integer nanoseconds, and between ``datetime`` and RFC 3339, happen here and
nowhere else.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import attrs

from .._deadline import check_at_most_max
from .._timefmt import ExactSeconds, ns_to_seconds, parse_rfc3339, to_utc, wire_text
from .._timefmt import seconds_to_ns as _s_to_ns
from . import _checks

T = TypeVar("T")

# Value kinds.
PLAIN = "plain"  # str, int, bool: as is
SEQ = "seq"  # tuple of plain values <-> list
DUR = "dur"  # float seconds <-> int nanoseconds
DURS = "durs"  # tuple of float seconds <-> list of int nanoseconds
TIME = "time"  # NanoDatetime <-> RFC 3339 string
ENUM = "enum"  # str enum member <-> its value
OBJ = "obj"  # nested Wire class <-> object
OBJS = "objs"  # tuple of nested Wire classes <-> list of objects
OBJMAP = "objmap"  # dict of str -> nested Wire class <-> object of objects
MAP = "map"  # dict of str -> plain <-> object
# The kinds a field can be lazy for: decoding them never adds to the owner's
# ``extra`` (an enum value this client lacks does), so it can wait.
LAZY_KINDS = frozenset({SEQ, DURS, TIME, OBJ, OBJS, OBJMAP, MAP})

_UNSET = object()
NATS_META_PREFIX = "_nats."


@attrs.frozen
class Spec:
    """How one field is coded on the wire.

    Attributes:
        wire: the JSON key.
        kind: one of the kinds above.
        cls: the enum or nested class for ENUM / OBJ / OBJS / OBJMAP.
        none_wire: a wire value that stands for ``None`` both ways (Go's zero
            time, ``-1`` for "never active"), or unset.
        omit_zero: the server omits the zero value (Go ``omitempty`` on a
            non-pointer): absent means the field's zero default, and the
            zero default is omitted again on the way out.
        absent_none: the field has a non-``None`` default for users, but a
            wire key that is absent reads as ``None`` (so ``from_api`` keeps
            what the JSON said: a consumer without ``ack_policy``).
        lazy: ``from_api`` keeps the wire value and decodes it on the
            field's first read (see :class:`LazyField`).
    """

    wire: str
    kind: str = PLAIN
    cls: Any = None
    none_wire: Any = _UNSET
    omit_zero: bool = False
    absent_none: bool = False
    lazy: bool = False


def strip_nats(meta: Mapping[str, str] | None) -> dict[str, str] | None:
    """``meta`` without the server's ``_nats.*`` keys (``None`` stays ``None``)."""
    if meta is None:
        return None
    return {k: v for k, v in meta.items() if not k.startswith(NATS_META_PREFIX)}


# --------------------------------------------------------------------------
# Converting user input at construction.


def _type_error(field: str, want: str, value: Any) -> TypeError:
    return TypeError(f"{field}: expected {want}, got {type(value).__name__}")


def _plain(value: Any, typ: type, field: str) -> Any:
    if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise _type_error(field, "int", value)
    if typ is float:
        if isinstance(value, timedelta):
            return value.total_seconds()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(field, "seconds as float", value)
        if not math.isfinite(value):
            raise ValueError(f"{field}: must be finite, not {value!r}")
        return value if type(value) is ExactSeconds else float(value)
    if not isinstance(value, typ):
        raise _type_error(field, typ.__name__, value)
    return value


def _duration(value: Any, field: str) -> float:
    """Float seconds of a duration, at most what the wire's int64 nanoseconds hold.

    An :class:`ExactSeconds` came from the server as such nanoseconds, so it
    passes even just above ``MAX_SECONDS`` (whole seconds): ``2**63 - 1`` ns.
    """
    seconds = _plain(value, float, field)
    if type(seconds) is ExactSeconds:
        return seconds
    return check_at_most_max(field, seconds)


def _tuple(value: Any, field: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise _type_error(field, "a list or tuple", value)
    return tuple(value)


def _convert(spec: Spec, typ: Any, value: Any, field: str) -> Any:
    kind = spec.kind
    if kind == PLAIN:
        return _plain(value, typ, field)
    if kind == DUR:
        return _duration(value, field)
    if kind == DURS:
        return tuple(_duration(v, field) for v in _tuple(value, field))
    if kind == SEQ:
        return tuple(_plain(v, typ, field) for v in _tuple(value, field))
    if kind == TIME:
        return to_utc(value, field)
    if kind == ENUM:
        if isinstance(value, spec.cls):
            return value
        try:
            return spec.cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in spec.cls)
            raise ValueError(f"{field}: {value!r} is not one of {choices}") from None
    if kind == OBJ:
        if not isinstance(value, spec.cls):
            raise _type_error(field, spec.cls.__name__, value)
        return value
    if kind == OBJS:
        items = _tuple(value, field)
        for v in items:
            if not isinstance(v, spec.cls):
                raise _type_error(field, f"a list of {spec.cls.__name__}", v)
        return items
    if not isinstance(value, Mapping):
        raise _type_error(field, "a mapping", value)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise _type_error(field, "str keys", k)
        if kind == OBJMAP:
            if not isinstance(v, spec.cls):
                raise _type_error(field, f"{spec.cls.__name__} values", v)
            out[k] = v
        else:
            out[k] = _plain(v, typ, field) if typ is not None else v
    return out


def _converter(
    spec: Spec, typ: Any, check: _checks.Check | None, required: bool
) -> attrs.Converter[Any, Any]:
    def convert(value: Any, attribute: attrs.Attribute[Any]) -> Any:
        if not _checks.checking():
            return value  # from_api: _decode already produced the field's type
        if value is None:
            if required:
                _checks.fail(attribute.name, "is required")
            return None
        value = _convert(spec, typ, value, attribute.name)
        if check is not None:
            check(value, attribute.name)
        return value

    return attrs.Converter(convert, takes_field=True)


def field(
    wire: str,
    kind: str = PLAIN,
    typ: Any = None,
    *,
    cls: Any = None,
    check: _checks.Check | None = None,
    default: Any = None,
    none_wire: Any = _UNSET,
    omit_zero: bool = False,
    convert: bool = True,
    eq: Any = True,
    lazy: bool = False,
) -> Any:
    """Declare a wire-coded attrs field.

    Args:
        wire: the JSON key.
        kind: how the value is coded (module constants).
        typ: the Python type of a PLAIN value (or of SEQ / MAP items).
        cls: the enum or nested class.
        check: a value check run at construction (not in ``from_api``).
        default: the default value (``None``: omitted on the wire;
            ``attrs.NOTHING``: required).
        none_wire: see :class:`Spec`.
        omit_zero: see :class:`Spec`.
        convert: type-check and normalise input (configs); info classes
            built only from server JSON skip it for speed.
        eq: as attrs' ``eq`` (a key function is allowed).
        lazy: decode the wire value on the field's first read, not in
            ``from_api`` (a nested part few callers read); for info fields of
            the kinds in ``LAZY_KINDS``, in a class built with ``slots=False``.

    Raises:
        TypeError: ``lazy`` for a field that cannot be lazy.
    """
    absent_none = convert and default is not None and not omit_zero
    if lazy and (convert or kind not in LAZY_KINDS or default is not None):
        raise TypeError(f"{wire}: only an info field of kind {sorted(LAZY_KINDS)} can be lazy")
    spec = Spec(wire, kind, cls, none_wire, omit_zero, absent_none, lazy)
    mutable = kind in (MAP, OBJMAP)
    return attrs.field(
        default=default,
        converter=_converter(spec, typ, check, default is attrs.NOTHING) if convert else None,
        eq=eq,
        hash=False if mutable else None,
        metadata={"wire": spec},
    )


def info_field(wire: str, kind: str = PLAIN, **kw: Any) -> Any:
    """A field of an info class: server data, so no input conversion or checks."""
    return field(wire, kind, convert=False, **kw)


def extra_field() -> Any:
    """The ``extra`` field: wire keys this client does not know, kept as JSON."""
    return attrs.field(factory=dict, hash=False)


# --------------------------------------------------------------------------
# Decoding and encoding.

_TABLES: dict[type, tuple[tuple[str, Spec], ...]] = {}


def _table(cls: type) -> tuple[tuple[str, Spec], ...]:
    """``(attribute name, spec)`` of each wire-coded field of ``cls``, in order."""
    table = _TABLES.get(cls)
    if table is None:
        table = _TABLES[cls] = tuple(
            (a.name, a.metadata["wire"]) for a in attrs.fields(cls) if "wire" in a.metadata
        )
    return table


def _encode(spec: Spec, value: Any) -> Any:
    kind = spec.kind
    if kind == PLAIN:
        return value
    if kind == SEQ:
        return list(value)
    if kind == DUR:
        return _s_to_ns(value, spec.wire)
    if kind == DURS:
        return [_s_to_ns(v, spec.wire) for v in value]
    if kind == TIME:
        return wire_text(value)
    if kind == ENUM:
        return value.value
    if kind == OBJ:
        return value.to_api()
    if kind == OBJS:
        return [v.to_api() for v in value]
    if kind == OBJMAP:
        return {k: v.to_api() for k, v in value.items()}
    return dict(value)


class Wire:
    """Base of every config and info class: ``from_api``, ``to_api``, a short repr."""

    __slots__ = ()

    #: Response-envelope keys ``from_api`` drops instead of keeping in ``extra``.
    _ENVELOPE: ClassVar[frozenset[str]] = frozenset()

    if TYPE_CHECKING:  # what every subclass has (each is an attrs class with ``extra``)
        __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]
        extra: Mapping[str, Any]

    @classmethod
    def from_api(cls: type[T], d: Mapping[str, Any]) -> T:
        """Build from the server's JSON (a decoded dict).

        Keys this client does not know, and enum values it does not know, are
        kept in ``extra`` so ``to_api`` sends them back unchanged. Value checks
        are skipped: what the server returns is taken as it is.

        The nested parts few callers read (a stream info's config, cluster,
        sources and timestamps, a state's per-subject counts...) are decoded
        on first read, from ``d``'s values as they are then: hand ``d`` over
        (as a reply just decoded is) rather than changing it afterwards.

        The first call compiles the class's decoder from its field specs (see
        :func:`compile_decoder`) and installs it as the class's ``from_api``.

        Raises:
            TypeError: ``d`` is not a mapping, or a required key is missing
                (inside a lazy part: when that part is first read).
        """
        decoded: T = _decoder(cls)(cls, d)
        return decoded

    def to_api(self) -> dict[str, Any]:
        """The server's JSON for this value: ``None`` fields omitted, ``extra`` merged in."""
        out: dict[str, Any] = {}
        for name, spec in _table(type(self)):
            value = getattr(self, name)
            if value is None:
                if spec.none_wire is not _UNSET:
                    out[spec.wire] = spec.none_wire
                continue
            if spec.omit_zero and not value:
                continue
            out[spec.wire] = _encode(spec, value)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def __getstate__(self) -> dict[str, Any]:
        """Every field's value, lazy ones decoded (what ``pickle`` and ``copy`` keep).

        Only a class with ``slots=False`` uses this one; attrs gives a slotted
        class its own.
        """
        return {a.name: getattr(self, a.name) for a in attrs.fields(type(self))}

    def _match_skip(self) -> frozenset[str]:
        """Fields :func:`config_matches` skips because the server derives them."""
        return frozenset()

    def __repr__(self) -> str:
        parts = []
        for a in attrs.fields(type(self)):
            value = getattr(self, a.name)
            default = a.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            if default is not attrs.NOTHING and value == default:
                continue
            if isinstance(value, enum.Enum):
                parts.append(f"{a.name}={type(value).__name__}.{value.name}")
            else:
                parts.append(f"{a.name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


# --------------------------------------------------------------------------
# Decoding: one decoder per class, compiled from its field specs.
#
# ``from_api`` is the hot path of every JetStream API call (a stream info holds
# some 70 fields). Interpreting the specs field by field for each reply costs
# twice what a straight-line function does, so each class gets such a function,
# generated from the same specs ``to_api`` reads: a new field needs no code.
# A class built with ``slots=False`` is filled through one new ``__dict__``
# (a dict store costs half an ``object.__setattr__``), and only such a class
# can have lazy fields: a decoded lazy field is then a plain instance attribute.

_MISSING = object()
_DECODERS: dict[type, Callable[[Any, Mapping[str, Any]], Any]] = {}

#: The ``__dict__`` key holding the wire values of lazy fields not read yet.
PENDING = "_wire_pending"


class LazyField:
    """A field ``from_api`` decodes on its first read, not when the reply arrives.

    Installed on the class under the field's name. ``from_api`` leaves the
    field out of the instance's ``__dict__`` and keeps its wire value under
    :data:`PENDING`; the first read decodes it (the same value the eager
    decoder gives) and stores it in ``__dict__``, where every later read finds
    it without this descriptor. An instance built by ``__init__`` has every
    field in ``__dict__`` and never calls it.

    Threads racing on a first read may both decode; ``dict.setdefault`` keeps
    the first value stored, and every reader gets that one.

    Args:
        name: the attribute's name.
        decode: wire value -> field value.
    """

    __slots__ = ("decode", "name")

    def __init__(self, name: str, decode: Callable[[Any], Any]) -> None:
        self.name = name
        self.decode = decode

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        fields = obj.__dict__
        pending = fields.get(PENDING)
        raw = _MISSING if pending is None else pending.get(self.name, _MISSING)
        if raw is _MISSING:  # another thread decoded it since this read began
            try:
                return fields[self.name]
            except KeyError:
                raise AttributeError(self.name) from None
        value = fields.setdefault(self.name, self.decode(raw))
        pending.pop(self.name, None)
        return value


def _missing_key(cls: type, wire: str) -> NoReturn:
    raise TypeError(f"{cls.__name__}.from_api: the required key {wire!r} is missing")


def _not_a_mapping(cls: type, d: object) -> NoReturn:
    raise TypeError(f"{cls.__name__}.from_api expects a dict, got {type(d).__name__}")


def _decoder(cls: type) -> Callable[[Any, Mapping[str, Any]], Any]:
    """The compiled ``from_api`` of ``cls``; compiled and installed on first use."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = compile_decoder(cls)
        if "from_api" not in vars(cls):  # a class's own from_api (another format) stays
            type.__setattr__(cls, "from_api", classmethod(decoder))
    return decoder


def _decode_expr(kind: str, i: int) -> str:
    """The expression that decodes the wire value ``v`` of field ``i`` by its kind."""
    return {
        PLAIN: "v",
        SEQ: "tuple(v)",
        DUR: "_ns(v)",
        DURS: "tuple([_ns(x) for x in v])",
        TIME: "_time(v)",
        OBJ: f"_c{i}.from_api(v)",
        OBJS: f"tuple([_c{i}.from_api(x) for x in v])",
        OBJMAP: f"{{k: _c{i}.from_api(x) for k, x in v.items()}}",
        MAP: "dict(v)",
    }[kind]


def _default(env: dict[str, Any], i: int, a: attrs.Attribute[Any]) -> str:
    """The expression of field ``i``'s default (a factory is called each time)."""
    default: Any = a.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        env[f"_f{i}"] = default.factory
        return f"_f{i}()"
    env[f"_d{i}"] = default
    return f"_d{i}"


def _field_lines(
    env: dict[str, Any], i: int, a: attrs.Attribute[Any], spec: Spec, put: Callable[[str, str], str]
) -> list[str]:
    """The lines of a compiled decoder that read field ``i`` (``a``) by its spec.

    ``put(name, expr)`` is the statement that sets a field; a lazy field's
    wire value goes to ``p`` (the pending values) instead.
    """
    name, wire = repr(a.name), repr(spec.wire)
    default = _default(env, i, a)
    if a.default is attrs.NOTHING:
        set_default = f"_missing_key(cls, {wire})"
    else:
        set_default = put(name, default)
    plain = spec.kind == PLAIN and spec.none_wire is _UNSET and not spec.absent_none
    if plain and a.default is None:
        return ["    " + put(name, f"g({wire})")]  # absent and null are both the default, None
    if plain and a.default is not attrs.NOTHING:
        return [f"    v = g({wire})", "    " + put(name, f"{default} if v is None else v")]
    env[f"_n{i}"] = spec.none_wire
    is_null = "v is None" + (f" or v == _n{i}" if spec.none_wire is not _UNSET else "")
    if spec.absent_none:
        lines = [
            f"    v = g({wire}, _MISSING)",
            "    if v is _MISSING:",
            "        " + put(name, "None"),
            f"    elif {is_null}:",
        ]
    else:
        lines = [f"    v = g({wire})", f"    if {is_null}:"]
    lines += [f"        {set_default}", "    else:"]
    if spec.lazy:
        return lines + [f"        p[{name}] = v"]
    if spec.kind == ENUM:
        env[f"_e{i}"] = spec.cls._value2member_map_
        return lines + [
            "        try:",
            "            " + put(name, f"_e{i}[v]"),
            "        except (KeyError, TypeError):  # a value this client lacks",
            f"            extra[{wire}] = v",
            f"            {set_default}",
        ]
    env[f"_c{i}"] = spec.cls
    return lines + ["        " + put(name, _decode_expr(spec.kind, i))]


def _lazy_decode(env: dict[str, Any], i: int, spec: Spec) -> Callable[[Any], Any]:
    """The function that decodes lazy field ``i``'s wire value (never null: see the decoder)."""
    env[f"_c{i}"] = spec.cls
    scope: dict[str, Any] = {}
    exec(f"def decode(v):\n    return {_decode_expr(spec.kind, i)}", env, scope)  # noqa: S102
    decode: Callable[[Any], Any] = scope["decode"]
    return decode


def compile_decoder(cls: type) -> Callable[[Any, Mapping[str, Any]], Any]:
    """Generate the ``from_api`` function of the attrs class ``cls`` from its field specs.

    For each wire-coded field, in one straight line: a key that is absent or
    null, or holds the spec's ``none_wire``, gives the field's default (absent
    gives ``None`` for an ``absent_none`` field); otherwise the value is
    decoded by its kind, or, for a lazy field, kept to be decoded on first
    read (:class:`LazyField`, installed on ``cls`` here). An enum value this
    client lacks, and every key no field reads (response-envelope keys
    aside), go to ``extra``. Fields are set on a new instance directly:
    ``__init__`` converts and checks user input, which server data skips (see
    :func:`_checks.lenient`).

    Returns:
        ``from_api(cls, d)``, to be bound as a classmethod.

    Raises:
        TypeError: ``cls`` has a lazy field but ``__slots__`` (no ``__dict__``).
    """
    env: dict[str, Any] = {
        "_cls": cls, "_new": object.__new__, "_bind": object.__setattr__.__get__,
        "_set": object.__setattr__, "_dict": dict, "_Mapping": Mapping, "_MISSING": _MISSING,
        "_ns": ns_to_seconds, "_time": parse_rfc3339, "_decoder": _decoder,
        "_missing_key": _missing_key, "_not_a_mapping": _not_a_mapping,
    }  # fmt: skip
    fields = attrs.fields(cls)
    lazy = [(i, a) for i, a in enumerate(fields) if getattr(a.metadata.get("wire"), "lazy", False)]
    has_dict = cls.__dictoffset__ != 0
    if lazy and not has_dict:
        raise TypeError(f"{cls.__qualname__}: lazy fields need an attrs class with slots=False")
    known = set(cls._ENVELOPE)  # type: ignore[attr-defined]
    body = [
        "def from_api(cls, d):",
        "    if cls is not _cls:  # a subclass inherited this decoder: use its own",
        "        return _decoder(cls)(cls, d)",
        "    if type(d) is not _dict and not isinstance(d, _Mapping):",
        "        _not_a_mapping(cls, d)",
        "    extra = {}",
        "    if not _known.issuperset(d):",
        "        extra = {k: v for k, v in d.items() if k not in _known}",
        "    g = d.get",
        "    self = _new(_cls)",
    ]
    if has_dict:
        body += ["    o = {}  # the new __dict__", "    p = {}  # the lazy fields' wire values"]

        def put(name: str, expr: str) -> str:
            return f"o[{name}] = {expr}"
    else:
        body.append("    s = _bind(self)  # object.__setattr__, bound: frozen classes allow it")

        def put(name: str, expr: str) -> str:
            return f"s({name}, {expr})"

    for i, a in enumerate(fields):
        spec = a.metadata.get("wire")
        if spec is not None:
            known.add(spec.wire)
            body += _field_lines(env, i, a, spec, put)
        elif a.name != "extra":
            body.append("    " + put(repr(a.name), _default(env, i, a)))
    if "extra" in attrs.fields_dict(cls):
        body.append("    " + put("'extra'", "extra"))
    if has_dict:
        body += ["    if p:", f"        o[{PENDING!r}] = p", "    _set(self, '__dict__', o)"]
    body.append("    return self")
    env["_known"] = frozenset(known)
    exec(compile("\n".join(body), f"<from_api of {cls.__qualname__}>", "exec"), env)  # noqa: S102
    for i, a in lazy:
        type.__setattr__(cls, a.name, LazyField(a.name, _lazy_decode(env, i, a.metadata["wire"])))
    decoder: Callable[[Any, Mapping[str, Any]], Any] = env["from_api"]
    decoder.__annotations__ = {"d": Mapping[str, Any], "return": cls}
    decoder.__module__ = cls.__module__
    decoder.__qualname__ = f"{cls.__qualname__}.from_api"
    decoder.__doc__ = Wire.from_api.__doc__
    return decoder


def is_zero(value: Any) -> bool:
    """Whether ``value`` is what the server leaves out as empty (Go ``omitempty``).

    That is ``False``, ``0``, ``""``, an empty collection, an enum's
    ``"default"`` / ``"none"`` member, or a nested value whose fields are all
    zero or unset.
    """
    if value is None:
        return True
    if isinstance(value, Wire):
        if value.extra:
            return False
        return all(
            is_zero(getattr(value, a.name)) for a in attrs.fields(type(value)) if a.name != "extra"
        )
    if isinstance(value, enum.Enum):
        return value.value in ("default", "none")
    if isinstance(value, datetime):
        return False
    return not value


# --------------------------------------------------------------------------
# The "config and keyword arguments" rule, and comparing configs.


def merge_config(cls: type[T], config: T | None, fields: Mapping[str, Any]) -> T:
    """Combine an optional config object with keyword fields.

    Returns ``config`` when ``fields`` is empty, ``cls(**fields)`` when
    ``config`` is ``None``, and otherwise ``config`` with ``fields``
    replacing its values (``attrs.evolve``; checks run again).

    Raises:
        TypeError: ``fields`` names a field ``cls`` lacks, or ``config`` is
            not a ``cls``.
        ValueError: a field value fails its check.
    """
    names = {a.name for a in attrs.fields(cls) if a.init}  # type: ignore[arg-type]
    unknown = sorted(set(fields) - names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
    if not fields:
        return config if config is not None else cls()
    if config is None:
        return cls(**fields)
    return attrs.evolve(config, **fields)  # type: ignore[misc]


def _matches(want: Any, have: Any) -> bool:
    if have is None:
        return is_zero(want)
    if isinstance(want, Wire):
        return isinstance(have, type(want)) and config_matches(want, have)
    if isinstance(want, tuple) and want and isinstance(want[0], Wire):
        return (
            isinstance(have, tuple)
            and len(have) == len(want)
            and all(_matches(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


def config_matches(requested: Any, actual: Any) -> bool:
    """Whether the server's ``actual`` config honours every field of ``requested``.

    Fields left ``None`` in ``requested`` are not compared (the server chose
    them). Otherwise:

    - nested configs (placement, sources...) compare by the same rule;
    - ``metadata`` compares without the server's ``_nats.*`` keys;
    - a zero value requested (``False``, ``0``, ``""``, empty) also matches a
      field the server left out, since the server omits zero values;
    - server normalisations a class declares are applied to both sides (a
      stream's ``max_msgs=0`` is stored as ``-1``, ``num_replicas=0`` as 1,
      a zero ``duplicate_window`` or ``ack_wait`` picks the server default);
    - fields the server derives from others are skipped (a consumer's
      ``ack_wait`` when ``backoff`` is set, a mirror's ``mirror_direct``);
    - keys in ``requested.extra`` must be equal in ``actual.to_api()``.
    """
    cls = type(requested)
    if not isinstance(actual, cls):
        return False
    normalize: Mapping[str, Callable[[Any], Any]] = getattr(cls, "_MATCH_NORMALIZE", {})
    skip = requested._match_skip()
    for a in attrs.fields(cls):
        want = getattr(requested, a.name)
        if a.name == "extra":
            wire = actual.to_api() if want else {}
            if any(wire.get(k, _UNSET) != v for k, v in want.items()):
                return False
            continue
        if want is None or a.name in skip:
            continue
        have = getattr(actual, a.name)
        if a.name == "metadata":
            want, have = strip_nats(want), strip_nats(have)
        norm = normalize.get(a.name)
        if norm is not None:
            want, have = norm(want), norm(have)
            if want is _ANY:
                continue
        if not _matches(want, have):
            return False
    return True


_ANY = object()


def unlimited(value: Any) -> Any:
    """Normalise a limit where 0 and negatives mean "unlimited" (-1)."""
    return -1 if value is not None and value <= 0 else value


def default_if_zero(value: Any) -> Any:
    """A requested zero means "server default": anything matches."""
    return _ANY if value is not None and value == 0 else value
