"""Which thread a signal handler's exception can land on, and where in the code.

CPython runs Python signal handlers (``KeyboardInterrupt`` for Ctrl-C, an
alarm's handler) only on the main thread, and only at three kinds of point:
after a call into C returns, on entry to a Python function, and at the jump
back of a loop. Between those points (stores to attributes and locals,
arithmetic, ``bytearray`` appends and slice assignments) no handler runs.

The client relies on that in two ways. On the main thread it avoids work
that an exception would leave half done and that no later call could finish
(a fetch leaves the reading to the reader thread). And where a state change
must be whole, it is written as plain stores with no call in between, with
what a call did reported in memory the caller owns (see ``jetstream_sync._writer``).

After ``fork()`` the thread that forked is the child's main thread, so the
thread recorded here follows it.
"""

from __future__ import annotations

import os
import threading
from threading import get_ident

_main_ident = threading.main_thread().ident


def on_signal_thread() -> bool:
    """Whether the calling thread is the one signal handlers run on (the main thread)."""
    return get_ident() == _main_ident


def _after_fork_in_child() -> None:
    global _main_ident
    _main_ident = get_ident()


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["on_signal_thread"]
