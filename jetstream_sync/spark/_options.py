"""Data source options: reading them, checking them, turning them into ``connect`` arguments.

Spark hands a data source its options as a case-insensitive map of strings.
Option names are matched ignoring case and underscores, so ``nkeysSeed``,
``nkeys_seed`` and ``NKEYSSEED`` are the same option.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from .._server_pool import redact_url

# canonical option name -> ``client()`` keyword, for the connection options.
_CONNECT_STRINGS = {
    "name": "name",
    "user": "user",
    "password": "password",
    "token": "token",
    "nkeysseed": "nkeys_seed",
    "usercredentials": "user_credentials",
    "creds": "user_credentials",
    "tlscafile": "tls_ca_file",
    "tlscertfile": "tls_cert_file",
    "tlskeyfile": "tls_key_file",
}
_CONNECT_BOOLS = {"tls": "tls", "tlshandshakefirst": "tls_handshake_first"}
_CONNECT_FLOATS = {"connecttimeout": "connect_timeout"}


def canonical(name: str) -> str:
    """An option name without case or underscores: ``start_seq`` -> ``startseq``."""
    return name.replace("_", "").lower()


class Options:
    """The options of one data source, looked up by canonical name.

    Holds only strings, so it pickles.

    Args:
        raw: the options Spark passed (any mapping of str to str).
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._values = {canonical(str(k)): str(v) for k, v in dict(raw).items() if v is not None}

    def get(self, name: str, default: str | None = None) -> str | None:
        """The option's string value, or ``default``."""
        return self._values.get(canonical(name), default)

    def has(self, name: str) -> bool:
        """Whether the option was given."""
        return canonical(name) in self._values

    def required(self, name: str) -> str:
        """The option's value.

        Raises:
            ValueError: the option is missing or empty.
        """
        value = self.get(name)
        if not value:
            raise ValueError(f"the jetstream data source needs the option {name!r}")
        return value

    @overload
    def integer(self, name: str, default: int, minimum: int = 0) -> int: ...
    @overload
    def integer(self, name: str, default: None = None, minimum: int = 0) -> int | None: ...
    def integer(self, name: str, default: int | None = None, minimum: int = 0) -> int | None:
        """The option as an int (``default`` when absent).

        Raises:
            ValueError: not an integer, or below ``minimum``.
        """
        value = self.get(name)
        if value is None or value == "":
            return default
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"option {name!r} must be an integer, got {value!r}") from None
        if number < minimum:
            raise ValueError(f"option {name!r} must be at least {minimum}, got {number}")
        return number

    def boolean(self, name: str, default: bool) -> bool:
        """The option as a bool (``true``/``false``, any case).

        Raises:
            ValueError: neither true nor false.
        """
        value = self.get(name)
        if value is None or value == "":
            return default
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ValueError(f"option {name!r} must be true or false, got {value!r}")

    def servers(self) -> list[str]:
        """The ``servers`` option split on commas.

        Raises:
            ValueError: missing.
        """
        urls = [url.strip() for url in self.required("servers").split(",") if url.strip()]
        if not urls:
            raise ValueError("option 'servers' names no server")
        return urls

    def connect_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`jetstream_sync.spark.client` these options give."""
        kwargs: dict[str, Any] = {}
        for name, key in _CONNECT_STRINGS.items():
            if name in self._values:
                kwargs[key] = self._values[name]
        for name, key in _CONNECT_BOOLS.items():
            if name in self._values:
                kwargs[key] = self.boolean(name, False)
        for name, key in _CONNECT_FLOATS.items():
            if name in self._values:
                try:
                    kwargs[key] = float(self._values[name])
                except ValueError:
                    raise ValueError(
                        f"option {name!r} must be a number of seconds, got {self._values[name]!r}"
                    ) from None
        return kwargs

    def __repr__(self) -> str:
        shown = {k: ("***" if k in ("password", "token", "nkeysseed") else v)
                 for k, v in self._values.items()}  # fmt: skip
        if "servers" in shown:  # credentials in URLs: user:pass@ or token@
            shown["servers"] = ",".join(redact_url(u) for u in shown["servers"].split(","))
        return f"Options({shown})"
