"""Every JetStream config class in one place, and the helpers that go with them.

The classes live in :mod:`.stream_config` and :mod:`.consumer_config`;
this module re-exports them with :func:`merge_config` (the "config object
or keyword fields" rule of every method that takes a config) and
:func:`config_matches` (does the server's config honour a requested one).

How every config (and info) class behaves:

- Built in Python, values are converted (``"workqueue"`` to
  ``RetentionPolicy.WORK_QUEUE``, lists to tuples, aware datetimes to UTC)
  and checked by the server's own rules; a bad value raises ``ValueError``
  and a value of the wrong type ``TypeError``, both starting with the
  field's name. ``from_api`` skips the checks: server data is taken as is.
- ``to_api()`` omits ``None`` fields and converts float seconds to integer
  nanoseconds and datetimes to RFC 3339 (nanoseconds kept, see
  ``NanoDatetime``); ``from_api`` does the reverse.
- ``extra`` holds wire keys (and enum values) this client does not know;
  ``to_api`` sends them back so an update never drops a newer server's
  settings. ``extra`` takes part in equality (two configs that would send
  different JSON are not equal) but not in hashing.
- Equality ignores the server's ``_nats.*`` metadata keys
  (``_nats.req.level``, ``_nats.ver``, ``_nats.level``); so does
  :func:`config_matches`.
- All are frozen, keyword-only, picklable, and hashable (mappings are left
  out of the hash).
"""

from __future__ import annotations

from ._codec import config_matches, merge_config
from .consumer_config import ConsumerConfig, OrderedConsumerConfig
from .stream_config import (
    ExternalStream,
    Placement,
    Republish,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamSource,
    SubjectTransform,
)

__all__ = [
    "ConsumerConfig",
    "ExternalStream",
    "OrderedConsumerConfig",
    "Placement",
    "Republish",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamSource",
    "SubjectTransform",
    "config_matches",
    "merge_config",
]
