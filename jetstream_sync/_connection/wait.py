"""How the client waits for the socket: chosen once, when it connects.

Two modes, as psycopg 3 chooses between ``epoll``, a selector and C:

* ``"threads"`` (OS threads, the default): the reader thread watches the
  socket in ``epoll``, and a lone requester's round trip sends, polls and
  parses in one C call with the GIL released (see
  :mod:`jetstream_sync._connection.read_role`).
* ``"cooperative"`` (gevent or eventlet): no call blocks inside C and no
  ``epoll`` is used. The reader (a greenlet once ``threading`` is patched)
  reads in blocking ``recv_into`` calls of the patched ``socket``, so the hub
  switches to other greenlets while it waits; requesters wait on their reply
  through the patched ``threading`` primitives; parsing stays in C. The
  reader reads at most 64 KiB at a time, and both the reader and a
  publishing greenlet yield to the hub every :data:`COOPERATIVE_SLICE`
  seconds, so neither a busy connection nor a loop of publishes keeps the
  others waiting long.

The mode is detected from what gevent (``gevent.monkey.is_module_patched``)
or eventlet (``eventlet.patcher.is_monkey_patched``) has patched, unless the
``wait`` option of :func:`~jetstream_sync.connect` or the
``JETSTREAM_SYNC_WAIT`` environment variable names it. Neither library is
imported here: only one a program has already imported can have patched
anything. What cannot work is refused with :class:`WaitModeError`:

* ``"threads"`` once a library has patched ``socket``, ``select`` or
  ``threading``: the patched ``select`` has no ``epoll``, and a C call that
  blocks would stop every greenlet;
* ``"cooperative"`` when ``socket``, ``select`` and ``threading`` are not all
  patched alike (a greenlet reader blocked in an unpatched ``recv`` stops the
  hub; a patched socket read from a real thread belongs to another hub).

``"cooperative"`` with nothing patched is allowed: the same code on plain OS
threads (blocking reads, a hand-off per reply), which is how tests run it
without gevent.
"""

from __future__ import annotations

import os
import sys
import time

import attrs

from ..errors import WaitModeError

ENV_VAR = "JETSTREAM_SYNC_WAIT"
THREADS = "threads"
COOPERATIVE = "cooperative"
CHOICES = ("auto", THREADS, COOPERATIVE)
# Cooperative mode: the longest the reader or a publishing greenlet goes on
# before it yields to the hub (see read_role and writer.CooperativeWriter).
COOPERATIVE_SLICE = 0.005
# What the cooperative mode needs patched, by each library's name for it.
_NEEDED = {"gevent": ("socket", "select", "threading"), "eventlet": ("socket", "select", "thread")}


@attrs.frozen
class WaitMode:
    """The way a connection waits, chosen by :func:`choose`.

    Attributes:
        name: ``"threads"`` or ``"cooperative"``.
        library: ``"gevent"`` or ``"eventlet"`` when one has patched the
            standard library, else None.
    """

    name: str
    library: str | None = None

    @property
    def cooperative(self) -> bool:
        """True in the cooperative mode: no blocking C call, no ``epoll``."""
        return self.name == COOPERATIVE


def check_choice(value: str | None) -> str | None:
    """Validate the ``wait`` option of ``connect()`` (None: the environment decides).

    Raises:
        ValueError: not one of ``"auto"``, ``"threads"``, ``"cooperative"``.
        TypeError: not a string.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"wait must be a string, not {type(value).__name__}")
    if value not in CHOICES:
        raise ValueError(f"wait must be one of {', '.join(map(repr, CHOICES))}, got {value!r}")
    return value


def patched() -> tuple[str, tuple[str, ...]] | None:
    """The library that has patched the standard library, and what it patched; or None."""
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is not None:
        done = tuple(m for m in _NEEDED["gevent"] if gevent_monkey.is_module_patched(m))
        if done:
            return "gevent", done
    eventlet_patcher = sys.modules.get("eventlet.patcher")
    if eventlet_patcher is not None:
        done = tuple(m for m in _NEEDED["eventlet"] if eventlet_patcher.is_monkey_patched(m))
        if done:
            return "eventlet", done
    return None


def choose(option: str | None) -> WaitMode:
    """The wait mode for a connection made now.

    Args:
        option: the ``wait`` option of ``connect()``; None reads
            ``JETSTREAM_SYNC_WAIT`` (unset or empty: ``"auto"``).

    Raises:
        WaitModeError: the mode asked for cannot work in this process (the
            message names the mode and the fix).
        ValueError: ``JETSTREAM_SYNC_WAIT`` holds something else than a mode.
    """
    source = "the wait option"
    if option is None:
        option = os.environ.get(ENV_VAR) or "auto"
        source = f"{ENV_VAR}={option}"
        if option not in CHOICES:
            raise ValueError(
                f"{ENV_VAR} must be one of {', '.join(map(repr, CHOICES))}, got {option!r}"
            )
    found = patched()
    if found is None:
        return WaitMode(THREADS if option == "auto" else option)
    library, done = found
    if option == THREADS:
        raise WaitModeError(
            f"wait mode 'threads' ({source}) cannot work: {library} has patched "
            f"{', '.join(done)}, where epoll is missing and a blocking C call stops every "
            f"greenlet; use wait='cooperative' (the default once {library} has patched)"
        )
    missing = [m for m in _NEEDED[library] if m not in done]
    if missing:
        raise WaitModeError(
            f"wait mode 'cooperative' (chosen for {library}) cannot work: {library} has patched "
            f"{', '.join(done)} but not {', '.join(missing)}; patch them all before connecting "
            + (
                "(gevent.monkey.patch_all())"
                if library == "gevent"
                else "(eventlet.monkey_patch())"
            )
        )
    return WaitMode(COOPERATIVE, library)


def pause() -> None:
    """Cooperative mode: let the other greenlets run, timers and IO included.

    A sleep of a microsecond rather than ``sleep(0)``: gevent's ``sleep(0)``
    runs the greenlets already woken but neither fires timers nor polls IO.
    """
    time.sleep(1e-6)


__all__ = [
    "CHOICES",
    "COOPERATIVE",
    "COOPERATIVE_SLICE",
    "ENV_VAR",
    "THREADS",
    "WaitMode",
    "check_choice",
    "choose",
    "pause",
]
