"""The Object Store tests' shared fixture: a fresh bucket."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import jetstream_sync
from tests.fixtures.jetstream import unique_stream_name


@pytest.fixture
def obs(js: jetstream_sync.JetStreamContext) -> Iterator[jetstream_sync.ObjectStore]:
    """A fresh object store, deleted afterwards (test_object_store.py has its own)."""
    name = unique_stream_name("OBJS")
    yield js.create_object_store(bucket=name)
    with contextlib.suppress(jetstream_sync.ObjectStoreNotFoundError):
        js.delete_object_store(name)
