"""The multi-valued, case-sensitive header mapping carried by NATS messages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence


class Headers(Mapping[str, str]):
    """Message headers: a read-only mapping from key to its first value.

    Keys are case-sensitive, as on the wire, and may repeat; ``get_all`` returns
    every value of a key in wire order. Build one from any mapping whose values
    are a string or a sequence of strings, or from ``(key, value)`` pairs with
    :meth:`from_pairs`.
    """

    __slots__ = ("_values",)

    def __init__(self, source: Mapping[str, str | Sequence[str]] | None = None) -> None:
        values: dict[str, list[str]] = {}
        if source is not None:
            if isinstance(source, Headers):
                values = {k: list(v) for k, v in source._values.items()}
            else:
                for key, value in source.items():
                    if isinstance(value, str):
                        values[key] = [value]
                    else:
                        values[key] = [str(v) for v in value]
        self._values = values

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
            return self._values == Headers(other)._values
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._values!r})"

    def __reduce__(self):
        return (Headers, (self._values,))


def header_pairs(headers: Mapping[str, str | Sequence[str]]) -> list[tuple[str, str]]:
    """Flatten any accepted header mapping into ``(key, value)`` pairs."""
    if isinstance(headers, Headers):
        return headers.pairs()
    pairs = []
    for key, value in headers.items():
        if isinstance(value, str):
            pairs.append((key, value))
        else:
            pairs.extend((key, str(v)) for v in value)
    return pairs
