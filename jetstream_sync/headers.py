"""The multi-valued, case-sensitive header mapping carried by NATS messages."""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Any


class Headers(Mapping[str, str]):
    """Message headers: a read-only mapping from key to its first value.

    Keys are case-sensitive, as on the wire, and may repeat; ``get_all`` returns
    every value of a key in wire order. Build one from any mapping whose keys
    are strings and whose values are a string or a sequence (list, tuple) of
    strings, or from ``(key, value)`` pairs with :meth:`from_pairs`. A key
    given an empty sequence is left out, as no header is sent for it. Nothing
    else is converted: ``bytes`` values (decode them first), numbers and
    ``None`` raise :class:`TypeError` naming the key.
    """

    __slots__ = ("_values",)

    def __init__(self, source: Mapping[str, str | Sequence[str]] | None = None) -> None:
        values: dict[str, list[str]] = {}
        if source is not None:
            if isinstance(source, Headers):
                values = {k: list(v) for k, v in source._values.items()}
            else:
                for key, value in _items(source):
                    items = _values(_key(key), value)
                    if items:  # an empty sequence sends no header: no key either
                        values[key] = items
        self._values: dict[str, list[str]] = values

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> Headers:
        """Build headers from ``(key, value)`` pairs, keeping repeated keys in order."""
        headers = cls()
        values = headers._values
        for key, value in pairs:
            values.setdefault(key, []).append(value)
        return headers

    def __getitem__(self, key: str) -> str:
        return self._values[key][0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def get_all(self, key: str) -> list[str]:
        """Every value of ``key`` in wire order (an empty list when absent)."""
        return list(self._values.get(key, ()))

    def pairs(self) -> list[tuple[str, str]]:
        """Every ``(key, value)`` pair, repeated keys included, in order."""
        return [(k, v) for k, vs in self._values.items() for v in vs]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._values == other._values
        if isinstance(other, Mapping):
            try:
                return self._values == Headers(other)._values
            except TypeError:  # a key or value no header can hold: not equal
                return False
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._values!r})"

    def __reduce__(self) -> tuple[type[Headers], tuple[dict[str, list[str]]]]:
        return (Headers, (self._values,))


def header_pairs(headers: Mapping[str, str | Sequence[str]]) -> list[tuple[str, str]]:
    """Flatten any accepted header mapping into ``(key, value)`` pairs.

    Raises:
        TypeError: ``headers`` is not a mapping, a key is not a ``str``, or a
            value is neither a ``str`` nor a sequence of ``str`` (``bytes``
            included); the message names the key.
    """
    if isinstance(headers, Headers):
        return headers.pairs()
    pairs = []
    for key, value in _items(headers):
        if type(value) is str and type(key) is str:
            pairs.append((key, value))
        else:
            key = _key(key)
            pairs.extend((key, v) for v in _values(key, value))
    return pairs


def _items(headers: object) -> ItemsView[Any, object]:
    """The ``(key, value)`` items of a header mapping."""
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str, not {type(headers).__name__}")
    return headers.items()


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"header key {key!r} must be a str, not {type(key).__name__}")
    return key


def _values(key: str, value: object) -> list[str]:
    """The values of one header: a ``str``, or a sequence of ``str``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        if all(isinstance(v, str) for v in value):
            return list(value)
        bad = next(v for v in value if not isinstance(v, str))
        raise TypeError(f"header {key!r}: every value must be a str, got {bad!r}")
    hint = " (decode it first)" if isinstance(value, bytes | bytearray | memoryview) else ""
    raise TypeError(
        f"header {key!r}: the value must be a str or a sequence of str, "
        f"not {type(value).__name__}{hint}"
    )
