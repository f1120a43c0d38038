"""Inbox identifiers are unique per process, even after a fork that ran no at-fork handler."""

from __future__ import annotations

import os

from jetstream_sync._nuid import Nuid


def test_a_process_that_forked_from_c_gets_a_new_prefix(monkeypatch):
    """uWSGI forks its workers from C (no os.register_at_fork handler runs): next() sees the
    new pid and starts a new random prefix, so two workers never share request inboxes."""
    nuid = Nuid()
    first = nuid.next()
    assert nuid.next()[:12] == first[:12]
    parent = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: parent + 1)
    assert nuid.next()[:12] != first[:12]
