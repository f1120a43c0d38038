"""JetStream's one seam for the rooms above it (Key-Value and Object Store).

Key-Value and Object Store wrap a :class:`JetStreamContext` through its public
methods; what they share of JetStream's internals besides (the wire-config
machinery their configs are built with, the config checks) comes from this
module alone (with :mod:`._watch_feed`'s feed, which their watchers run on),
so the rest of ``jetstream/`` can change freely. They also attach themselves
to the context through it (:mod:`._rooms`: ``register_key_value``,
``register_object_store``), since ``jetstream/`` never imports them.
``tests/test_layering.py`` checks that no upper room imports another private
module of ``jetstream/``.
"""

from __future__ import annotations

from . import _checks as checks  # the field checks configs share
from ._api import ASK_AGAIN_AFTER  # how long a read-only request waits before asking again
from ._codec import (  # configs built from and to the server's JSON
    DUR,
    ENUM,
    MAP,
    OBJ,
    Wire,
    extra_field,
    field,
    merge_config,
    strip_nats,
)
from ._rooms import register_key_value, register_object_store  # how the rooms attach
from ._watch_feed import WatchFeed, initial_end, stored_bounds  # the watchers' eager feed

__all__ = [
    "ASK_AGAIN_AFTER",
    "DUR",
    "ENUM",
    "MAP",
    "OBJ",
    "Wire",
    "WatchFeed",
    "checks",
    "extra_field",
    "field",
    "initial_end",
    "merge_config",
    "register_key_value",
    "register_object_store",
    "stored_bounds",
    "strip_nats",
]
