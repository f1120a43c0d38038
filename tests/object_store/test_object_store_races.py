"""Two clients on one object name at once: puts, links, meta updates and reads in between.

Each interleaving is made exact: a put's data is a file whose first read waits for the
other client's call, a get's writer waits in its first write, or (where the call takes
nothing of the user's to wait in) the store's meta read is wrapped to run the other
client's call right after it.
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync as jsync
from jetstream_sync import ObjectMeta
from jetstream_sync.object_store.store import ObjectStore

CHUNK = 1024
BIG = 200 * CHUNK  # more chunks than a get requests ahead (64 of 1 KiB)


@pytest.fixture
def other(obs: jsync.ObjectStore, shared_server: Any) -> Iterator[jsync.ObjectStore]:
    """The same bucket through a second client: the other writer or reader."""
    with jsync.connect(shared_server.url) as nc2:
        yield nc2.jetstream().object_store(obs.bucket)


def _messages(js: jsync.JetStreamContext, obs: jsync.ObjectStore) -> int:
    return js.stream(obs.stream_name).info().state.messages


class _HeldFile(io.RawIOBase):
    """A binary file whose first read waits for ``release`` (``reading``: it began)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.reading = threading.Event()
        self.release = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        self.reading.set()
        assert self.release.wait(30)
        return self._data.readinto(buf)


def _put_held(obs: jsync.ObjectStore, name: str, data: bytes, meanwhile: Callable[[], Any]) -> Any:
    """``obs.put(name, data)`` with ``meanwhile()`` run after it read the name's meta."""
    held = _HeldFile(data)
    outcome: list[Any] = []

    def put() -> None:
        try:
            outcome.append(obs.put(name, held, chunk_size=CHUNK))
        except jsync.NatsError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=put)
    thread.start()
    try:
        assert held.reading.wait(30)
        meanwhile()
    finally:
        held.release.set()
        thread.join(30)
    return outcome[0]


def test_puts_that_overlap_leave_only_the_last_objects_chunks(js, obs, other):
    """A put whose name was put by another client after it read the meta still purges the
    chunks of the version it replaced: the other put's, not the one it read. Before, those
    stayed in the bucket for good, named by no meta."""
    obs.put("o", os.urandom(3 * CHUNK), chunk_size=CHUNK)
    data = os.urandom(5 * CHUNK)
    meanwhile = os.urandom(4 * CHUNK)
    info = _put_held(obs, "o", data, lambda: other.put("o", meanwhile, chunk_size=CHUNK))
    assert isinstance(info, jsync.ObjectInfo)
    assert obs.get("o") == data and other.get("o") == data
    assert _messages(js, obs) == info.chunks + 1  # its chunks and one meta, nothing else


def test_a_put_over_a_name_made_a_link_meanwhile_is_refused_and_leaves_no_chunks(js, obs, other):
    """The name became a link while the put sent its chunks: the put raises ObjectLinkError
    (as it would have at the start), purges its chunks and the link stays."""
    target = obs.put("target", b"t")
    error = _put_held(obs, "o", os.urandom(3 * CHUNK), lambda: other.add_link("o", target))
    assert isinstance(error, jsync.ObjectLinkError)
    assert obs.get_info("o").is_link and obs.get("o") == b"t"
    assert _messages(js, obs) == 3  # the target's chunk and meta, the link's meta


def _after_first_meta_read(monkeypatch, call: Callable[[], Any]) -> None:
    """Run ``call()`` once, right after the store's first meta read."""
    read = ObjectStore._info_and_seq
    pending = [call]

    def then_call(self: ObjectStore, *args: Any) -> Any:
        try:
            return read(self, *args)  # ObjectNotFoundError when the name has no meta yet
        finally:
            while pending:
                pending.pop()()

    monkeypatch.setattr(ObjectStore, "_info_and_seq", then_call)


def test_update_meta_applies_to_the_version_put_meanwhile(monkeypatch, obs, other):
    """A put between update_meta's read and its write: the update is made on the new
    version. Before, it wrote the old version's meta back over it: the name pointed at
    purged chunks and every get timed out."""
    obs.put("o", b"old")
    _after_first_meta_read(monkeypatch, lambda: other.put("o", b"new"))
    info = obs.update_meta("o", ObjectMeta(name="o", description="d"))
    monkeypatch.undo()
    assert (info.description, obs.get("o")) == ("d", b"new")


def test_a_rename_leaves_a_version_put_meanwhile_under_the_old_name(monkeypatch, obs, other):
    """A rename removes the old name's meta only up to the version it renamed: an object
    put under the old name meanwhile stays."""
    obs.put("old", b"first")
    _after_first_meta_read(monkeypatch, lambda: other.put("old", b"second"))
    obs.update_meta("old", ObjectMeta(name="new"))
    monkeypatch.undo()
    assert obs.get("old") == b"second"


def test_a_link_does_not_replace_an_object_put_meanwhile(monkeypatch, obs, other):
    """add_link checks the name is no object, then a put stores one: the link is refused."""
    target = obs.put("target", b"t")
    _after_first_meta_read(monkeypatch, lambda: other.put("o", b"object"))
    with pytest.raises(jsync.ObjectAlreadyExistsError):
        obs.add_link("o", target)
    monkeypatch.undo()
    assert obs.get("o") == b"object"


class _HeldWriter:
    """A writer whose first write waits for ``meanwhile()`` to be run."""

    def __init__(self, meanwhile: Callable[[], Any]) -> None:
        self.parts: list[bytes] = []
        self._meanwhile = meanwhile

    def write(self, data: bytes) -> None:
        if not self.parts:
            self._meanwhile()
        self.parts.append(bytes(data))


def test_get_into_a_writer_raises_when_the_object_is_replaced_mid_read(obs, other):
    """The chunks still to come were purged by the other client's put: get_into raises
    ObjectReplacedError saying how much of the old version the writer got, instead of
    waiting for chunks that never come and raising TimeoutError."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)
    writer = _HeldWriter(lambda: other.put("o", b"new"))
    with pytest.raises(jsync.ObjectReplacedError) as caught:
        obs.get_into("o", writer, timeout=5)
    assert caught.value.written == sum(map(len, writer.parts)) >= CHUNK
    assert "replaced while it was read" in str(caught.value)


def test_get_returns_the_version_that_replaced_the_one_it_was_reading(monkeypatch, obs, other):
    """get holds what it read in memory, so it reads the name again when the version it was
    reading is replaced under it."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)
    _after_first_meta_read(monkeypatch, lambda: other.put("o", b"new"))
    assert obs.get("o", timeout=5) == b"new"


def test_get_into_starts_again_when_nothing_was_written_yet(monkeypatch, obs, other):
    """Replaced between reading the meta and the first chunk: get_into reads the new
    version, as if it had started after the put."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)
    _after_first_meta_read(monkeypatch, lambda: other.put("o", b"new"))
    out = io.BytesIO()
    info = obs.get_into("o", out, timeout=5)
    assert (out.getvalue(), info.size) == (b"new", 3)


def test_a_get_of_an_object_deleted_mid_read_raises_not_found(obs, other):
    """Deleted while get_into ran: ObjectNotFoundError says so."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)
    with pytest.raises(jsync.ObjectNotFoundError, match="deleted while it was read"):
        obs.get_into("o", _HeldWriter(lambda: other.delete("o")), timeout=5)


def test_object_replaced_error_pickles_with_what_was_written():
    """Spark ships errors between processes: the type, text and ``written`` survive."""
    again = pickle.loads(pickle.dumps(jsync.ObjectReplacedError("gone", 7)))
    assert (type(again), str(again), again.written) == (jsync.ObjectReplacedError, "gone", 7)


def test_sixteen_threads_putting_one_name_leave_one_object(js, obs):
    """16 threads put the same name at once, three times each: one object is left, whole,
    with its chunks and one meta in the stream."""
    datas = [os.urandom((2 + i % 3) * CHUNK) for i in range(16)]
    start = threading.Barrier(16)

    def put(data: bytes) -> None:
        start.wait(30)
        for _ in range(3):
            obs.put("o", data, chunk_size=CHUNK)

    threads = [threading.Thread(target=put, args=(data,)) for data in datas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    info = obs.get_info("o")
    assert obs.get("o") in datas and _messages(js, obs) == info.chunks + 1


def test_a_get_of_an_object_whose_bucket_is_deleted_mid_read_raises_bucket_not_found(
    js, obs, other
):
    """The bucket deleted while get_into ran: ObjectStoreNotFoundError, as every other call
    on a deleted bucket raises (not the StreamNotFoundError of the reading consumer)."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)
    with pytest.raises(jsync.ObjectStoreNotFoundError):
        obs.get_into("o", _HeldWriter(lambda: js.delete_object_store(obs.bucket)), timeout=5)


@pytest.mark.parametrize("when", ["mid_read", "before"])
def test_a_get_of_an_object_whose_chunks_were_purged_raises_size_mismatch(js, obs, other, when):
    """Its chunks purged, its meta left: the bytes can never come, so the get says the
    object is not whole (ObjectSizeMismatchError) instead of a TimeoutError that a retry
    meets again."""
    obs.put("o", os.urandom(BIG), chunk_size=CHUNK)

    def purge() -> None:
        js.stream(obs.stream_name).purge(subject=f"$O.{obs.bucket}.C.>")

    if when == "before":
        purge()
        with pytest.raises(jsync.ObjectSizeMismatchError, match="no longer stored"):
            other.get("o", timeout=5)
    else:
        with pytest.raises(jsync.ObjectSizeMismatchError, match="no longer stored"):
            obs.get_into("o", _HeldWriter(purge), timeout=5)
