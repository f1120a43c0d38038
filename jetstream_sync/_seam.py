"""The core's one seam for the upper rooms (Key-Value, Object Store, Spark, the CLI).

An upper room imports the package's public modules and, of the core, only this
module: what it needs of the core's internals and nothing more, so the core
can change everything else freely. ``tests/test_layering.py`` checks that no
upper room imports another private module of the core. Add a name here only
when an upper room needs it; say which in the comment beside it.
"""

from __future__ import annotations

from ._ack_subject import ack_tokens  # Key-Value: the revision and delta of an entry
from ._deadline import (  # every room: one deadline per call
    Deadline,
    check_at_most_max,  # Key-Value: durations a Go duration holds
    check_timeout,
    seconds_text,  # Key-Value: a timeout's seconds in its error
)
from ._log import logger  # Object Store: its watcher's warnings
from ._nuid import NUID  # Object Store: chunk subjects
from ._server_pool import redact_url  # Spark: no option error quotes a password
from ._subjects import (
    ApiSubject,  # OpenTelemetry: tells JetStream's API calls from publishes
    check_control_line,  # Key-Value: keys against max_control_line
    filter_covers,  # Key-Value: a watch's filters, none covering another
    is_filter_subject,  # Spark: the filter options and pushed-down subjects
    is_publish_subject,  # Spark: literal subjects (a prefix narrowed to a filter)
)
from ._timefmt import (  # Key-Value, Object Store, Spark: the server's timestamps
    datetime_from_ns,
    datetime_to_ns,
    format_rfc3339,
    parse_rfc3339,
)

__all__ = [
    "NUID",
    "ApiSubject",
    "Deadline",
    "ack_tokens",
    "check_at_most_max",
    "check_control_line",
    "check_timeout",
    "datetime_from_ns",
    "datetime_to_ns",
    "filter_covers",
    "format_rfc3339",
    "is_filter_subject",
    "is_publish_subject",
    "logger",
    "parse_rfc3339",
    "redact_url",
    "seconds_text",
]
