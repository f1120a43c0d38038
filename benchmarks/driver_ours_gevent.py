"""driver_ours in a process gevent has monkey-patched: the client's cooperative wait mode.

``python -m benchmarks --clients ours,ours-gevent --only S1,S2,S5`` puts its figures
beside the OS-thread ones (rows labelled ``ours-gevent``).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

from . import driver_ours  # noqa: E402 - after the patch, as an application does

driver_ours.CLIENT = "ours-gevent"

if __name__ == "__main__":
    driver_ours.main()
