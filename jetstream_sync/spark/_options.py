"""Data source options: which each role takes, reading them, making ``connect`` arguments.

Spark hands a data source its options as a case-insensitive map of strings
(it lowercases the names). Option names are matched ignoring case and
underscores, so ``nkeysSeed``, ``nkeys_seed`` and ``NKEYSSEED`` are the same
option. Each role (a batch read, a streaming write...) declares the options
it takes in :data:`ROLES`, here and nowhere else; an option outside its
role's list is refused when the reader or writer is made on the driver,
before any task runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, overload

from .._seam import redact_url
from ..errors import UnknownOptionError

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

#: The options every role takes: the servers and how to connect to them.
CONNECTION = (
    "servers", "user", "password", "token", "creds", "userCredentials", "nkeysSeed",
    "tls", "tlsCaFile", "tlsCertFile", "tlsKeyFile", "tlsHandshakeFirst", "name", "connectTimeout",
)  # fmt: skip
# canonical connection option name -> its documented spelling (Spark lowercases names).
_DOCUMENTED = {option.lower(): option for option in CONNECTION}
# What Spark itself passes to a streaming sink when the query sets them.
_SPARK_STREAM_SINK = ("checkpointLocation", "queryName")
# What Spark passes when load(), save() or start() is given a path.
_PATHS = frozenset(("path", "paths"))


def canonical(name: str) -> str:
    """An option name without case or underscores: ``start_seq`` -> ``startseq``."""
    return name.replace("_", "").lower()


@dataclass(frozen=True)
class Role:
    """One thing a data source does and the options it takes.

    Attributes:
        what: how errors name it (``a batch read of format("jetstream")``).
        options: the option names it takes, as documented.
    """

    what: str
    options: tuple[str, ...]

    def takes(self, name: str) -> bool:
        """Whether ``name`` (any case, any underscores) is one of its options."""
        return canonical(name) in {canonical(option) for option in self.options}


_STREAM = 'format("jetstream")'
_KV = 'format("jetstream-kv")'
BATCH_READ = Role(
    f"a batch read of {_STREAM}",
    (*CONNECTION, "stream", "subject", "startSeq", "endSeq", "startTime", "numPartitions",
     "failOnDataLoss", "startingOffsets", "endingOffsets", "startingTimestamp",
     "includeHeaders"),
)  # fmt: skip
STREAM_READ = Role(
    f"a streaming read of {_STREAM}",
    (*CONNECTION, "stream", "subject", "startingOffsets", "startingTimestamp",
     "maxMessagesPerTrigger", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
     "pollInterval", "numPartitions", "failOnDataLoss", "includeHeaders",
     "fetchOffset.numRetries", "fetchOffset.retryIntervalMs"),
)  # fmt: skip
BATCH_WRITE = Role(
    f"a batch write to {_STREAM}",
    (*CONNECTION, "subject", "stream", "writeId", "mode", "fastBatchRows", "dedupe"),
)
STREAM_WRITE = Role(
    f"a streaming write to {_STREAM}",
    (*CONNECTION, "subject", "stream", "mode", "fastBatchRows", "dedupe", *_SPARK_STREAM_SINK),
)
KV_READ = Role(
    f"a batch read of {_KV}", (*CONNECTION, "bucket", "keys", "includeDeletes", "includeHistory")
)
KV_WRITE = Role(f"a batch write to {_KV}", (*CONNECTION, "bucket"))
KV_FEED = Role(
    f"a streaming read of {_KV}",
    (*CONNECTION, "bucket", "keys", "startingOffsets", "maxMessagesPerTrigger",
     "maxOffsetsPerTrigger", "pollInterval", "numPartitions", "failOnDataLoss",
     "fetchOffset.numRetries", "fetchOffset.retryIntervalMs"),
)  # fmt: skip
_COUNTER = 'format("jetstream-counter")'
COUNTER_WRITE = Role(
    f"a batch write to {_COUNTER}",
    (*CONNECTION, "stream", "subject", "valueColumn", "writeId", "dedupe"),
)
COUNTER_STREAM_WRITE = Role(
    f"a streaming write to {_COUNTER}",
    (*CONNECTION, "stream", "subject", "valueColumn", "dedupe", *_SPARK_STREAM_SINK),
)
#: Every role of the ``jetstream``, ``jetstream-kv`` and ``jetstream-counter`` data sources.
ROLES = (
    BATCH_READ, STREAM_READ, BATCH_WRITE, STREAM_WRITE, KV_READ, KV_WRITE, KV_FEED,
    COUNTER_WRITE, COUNTER_STREAM_WRITE,
)  # fmt: skip


def refusal(name: str, role: Role) -> str:
    """Why ``role`` refuses the option ``name``, with the closest option it does take."""
    if canonical(name) in _PATHS:
        return (
            f"{role.what} takes no path (option {name!r}: an argument of load(), save() or "
            "start()); set its options instead"
        )
    text = f"{role.what} takes no option {name!r}"
    by_canonical = {canonical(option): option for option in role.options}
    close = difflib.get_close_matches(canonical(name), list(by_canonical), n=1)
    if close:
        text += f" (did you mean {by_canonical[close[0]]!r}?)"
    elsewhere = [other.what for other in ROLES if other is not role and other.takes(name)]
    if elsewhere:
        text += f"; {name!r} is an option of {' and of '.join(elsewhere)}"
    return f"{text}; it takes: {', '.join(role.options)}"


class Options:
    """The options of one data source role, looked up by canonical name.

    Holds only strings, so it pickles.

    Args:
        raw: the options Spark passed (any mapping of str to str).
        role: what they are for; they must all be among its options.

    Raises:
        UnknownOptionError: an option ``role`` does not take (the message
            names it and the closest one it does take).
    """

    def __init__(self, raw: Mapping[str, Any], role: Role) -> None:
        for name in raw:
            if not role.takes(str(name)):
                raise UnknownOptionError(refusal(str(name), role))
        self.role = role
        self._declared = {canonical(option) for option in role.options}
        self._values = {canonical(str(k)): str(v) for k, v in dict(raw).items() if v is not None}

    def _key(self, name: str) -> str:
        key = canonical(name)
        if key not in self._declared:  # a code path reading an option its role does not declare
            raise KeyError(f"{self.role.what} declares no option {name!r} (see ROLES)")
        return key

    def get(self, name: str, default: str | None = None) -> str | None:
        """The option's string value, or ``default``.

        Raises:
            KeyError: ``name`` is not one of the role's options (a bug, not bad input).
        """
        return self._values.get(self._key(name), default)

    def has(self, name: str) -> bool:
        """Whether the option was given."""
        return self._key(name) in self._values

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
                kwargs[key] = self.boolean(_DOCUMENTED[name], False)
        for name, key in _CONNECT_FLOATS.items():
            if name in self._values:
                try:
                    kwargs[key] = float(self._values[name])
                except ValueError:
                    raise ValueError(
                        f"option {_DOCUMENTED[name]!r} must be a number of seconds, "
                        f"got {self._values[name]!r}"
                    ) from None
        return kwargs

    def __repr__(self) -> str:
        shown = {k: ("***" if k in ("password", "token", "nkeysseed") else v)
                 for k, v in self._values.items()}  # fmt: skip
        if "servers" in shown:  # credentials in URLs: user:pass@ or token@
            shown["servers"] = ",".join(redact_url(u) for u in shown["servers"].split(","))
        return f"Options({shown})"
