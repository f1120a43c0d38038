"""Object Store (ADR-20) against a real server: buckets, objects, links, checks."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import jetstream_sync as jsync
from jetstream_sync import ObjectStoreConfig
from jetstream_sync.testing import NatsServer
from tests.fixtures.jetstream import drop_the_first_pull, unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import interrupted_at

CHUNK = 1024


@pytest.fixture
def bucket(js: jsync.JetStreamContext) -> Iterator[str]:
    """A unique bucket name; the bucket is deleted afterwards if made."""
    name = unique_stream_name("OBJ")
    yield name
    with contextlib.suppress(jsync.ObjectStoreNotFoundError):
        js.delete_object_store(name)


@pytest.fixture
def obs(js: jsync.JetStreamContext, bucket: str) -> jsync.ObjectStore:
    """A fresh bucket."""
    return js.create_object_store(bucket=bucket)


def _digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def _meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def _chunk_count(js: jsync.JetStreamContext, bucket: str) -> int:
    state = js.stream(f"OBJ_{bucket}").info(subjects_filter=f"$O.{bucket}.C.>").state
    return sum((state.subjects or {}).values())


# ---------------------------------------------------------------- buckets


def test_create_makes_the_adr_stream(js, bucket):
    """The bucket's stream has the ADR-20 name, subjects and settings."""
    js.create_object_store(bucket=bucket, description="d", metadata={"owner": "infra"})
    cfg = js.stream(f"OBJ_{bucket}").cached_info.config
    assert cfg.subjects == (f"$O.{bucket}.C.>", f"$O.{bucket}.M.>")
    assert cfg.discard == jsync.DiscardPolicy.NEW
    assert cfg.allow_rollup_hdrs and cfg.allow_direct
    assert cfg.max_bytes == -1 and cfg.num_replicas == 1
    assert cfg.description == "d" and cfg.metadata["owner"] == "infra"


def test_the_bucket_may_come_first_as_in_nats_py(js, bucket):
    """create_object_store("b") (nats.py's shape) names the bucket; the update calls take
    it the same way; naming it twice is a TypeError before anything is sent."""
    assert js.create_object_store(bucket, description="d").bucket == bucket
    assert js.update_object_store(bucket, description="e").status().description == "e"
    assert js.create_or_update_object_store(bucket).status().description is None
    with pytest.raises(TypeError, match="named twice"):
        js.create_object_store(bucket, bucket="other")


def test_config_maps_to_stream_fields():
    """ttl, max_bytes, storage, replicas and compression become the stream's fields."""
    cfg = ObjectStoreConfig(
        bucket="b", ttl=60.0, max_bytes=1000, storage="memory", replicas=3, compression=True
    ).stream_config()
    assert (cfg.name, cfg.max_age, cfg.max_bytes, cfg.num_replicas) == ("OBJ_b", 60.0, 1000, 3)
    assert cfg.storage == jsync.StorageType.MEMORY and cfg.compression == jsync.StoreCompression.S2
    assert ObjectStoreConfig.from_api(ObjectStoreConfig(bucket="b", ttl=5.0).to_api()).ttl == 5.0


@pytest.mark.parametrize("bad", ["", "a.b", "a b", "a*", "a>", "ü"])
def test_bad_bucket_names_are_refused(js, bad):
    """A bucket name outside [A-Za-z0-9_-]+ raises before anything is sent."""
    with pytest.raises(jsync.InvalidObjectStoreNameError):
        js.create_object_store(bucket=bad)
    with pytest.raises(jsync.InvalidObjectStoreNameError):
        js.object_store(bad)


def test_a_bucket_name_at_the_stream_name_limit_works_one_byte_more_is_refused(js):
    """OBJ_ and the bucket must fit the server's 255-byte stream names: 251 bytes work, 252
    raise LimitExceededError naming the bucket's own length, before anything is sent."""
    longest = unique_stream_name("O").ljust(251, "o")
    try:
        js.create_object_store(bucket=longest).put("o", b"v")
        assert js.object_store(longest).get("o") == b"v"
    finally:
        js.delete_object_store(longest)
    for call in (lambda b: js.create_object_store(bucket=b), js.object_store):
        with pytest.raises(jsync.LimitExceededError, match="bucket is too long: 252 bytes"):
            call(longest + "o")


def test_bucket_lookup_listing_and_delete(js, bucket):
    """A bucket is found by name, listed with its status, and gone after delete."""
    with pytest.raises(jsync.ObjectStoreNotFoundError):
        js.object_store(bucket)
    js.create_object_store(bucket=bucket, description="x")
    assert js.object_store(bucket).bucket == bucket
    assert bucket in list(js.object_store_names())
    status = {s.bucket: s for s in js.object_stores()}[bucket]
    assert status.description == "x" and status.backing_store == "JetStream"
    assert js.delete_object_store(bucket)
    with pytest.raises(jsync.ObjectStoreNotFoundError):
        js.delete_object_store(bucket)


def test_calls_on_a_deleted_bucket(js, bucket):
    """A handle on a bucket deleted since raises ObjectStoreNotFoundError, and so does a
    watcher running when it went (it raised the bare StreamNotFoundError of its consumer)."""
    obs = js.create_object_store(bucket=bucket)
    obs.put("a", b"1")
    watcher = obs.watch()
    assert watcher.next(timeout=5).name == "a" and watcher.next(timeout=5) is None
    js.delete_object_store(bucket)
    with pytest.raises(jsync.ObjectStoreNotFoundError, match=repr(bucket)):
        watcher.next(timeout=10)
    watcher.stop()
    calls = (
        lambda: obs.get_info("a"), lambda: obs.put("b", b"2"), obs.status, lambda: obs.get("a"),
        lambda: obs.delete("a"), obs.list, obs.watch,
    )  # fmt: skip
    for call in calls:
        with pytest.raises(jsync.ObjectStoreNotFoundError):
            call()


def test_bucket_without_direct_get_is_read_through_the_leader(js, bucket):
    """A bucket whose stream stopped allowing direct get still answers get_info and get."""
    obs = js.create_object_store(bucket=bucket)
    obs.put("a", b"1")
    cfg = js.stream(f"OBJ_{bucket}").cached_info.config
    js.update_stream(cfg, allow_direct=False)
    assert obs.get_info("a").size == 1 and obs.get("a") == b"1"


def test_create_with_another_config_and_update(js, bucket):
    """Re-creating with another config fails; update changes it; update of nothing fails."""
    js.create_object_store(bucket=bucket)
    js.create_object_store(bucket=bucket)  # same config: fine
    with pytest.raises(jsync.ObjectStoreExistsError):
        js.create_object_store(bucket=bucket, description="other")
    assert js.update_object_store(bucket=bucket, description="new").status().description == "new"
    other = unique_stream_name("OBJ")
    with pytest.raises(jsync.ObjectStoreNotFoundError):
        js.update_object_store(bucket=other)
    js.create_or_update_object_store(bucket=other, ttl=30.0)
    assert js.object_store(other).status().ttl == 30.0
    js.delete_object_store(other)


def test_status_config_is_the_bucket_config_for_an_update_of_one_field(js, bucket):
    """status().config reads back what the bucket was made with; updating from it keeps the rest."""
    made = jsync.ObjectStoreConfig(
        bucket=bucket, description="models", ttl=3600.0, max_bytes=1 << 20,
        storage="memory", replicas=1, compression=True, metadata={"team": "ml"},
    )  # fmt: skip
    obs = js.create_object_store(made)
    assert obs.status().config == made
    js.update_object_store(obs.status().config, ttl=60.0)
    assert obs.status().config == attrs.evolve(made, ttl=60.0)
    js.update_object_store(bucket=bucket, storage="memory")  # the whole config: defaults
    left = obs.status().config
    assert (left.description, left.ttl, left.max_bytes, left.compression, left.metadata) == (
        None, None, None, False, None,
    )  # fmt: skip


def test_status_and_seal(obs):
    """status() reports the bucket; after seal() a put or a delete raises StreamSealedError
    and what was stored stays readable."""
    obs.put("a", b"x" * 10)
    status = obs.status()
    assert status.bucket == obs.bucket and not status.sealed and status.size > 0
    assert obs.seal().sealed and obs.status().sealed
    with pytest.raises(jsync.StreamSealedError) as put:
        obs.put("b", b"y")
    assert put.value.err_code == 10109
    with pytest.raises(jsync.StreamSealedError):
        obs.delete("a")
    assert obs.get("a") == b"x" * 10
    assert [info.name for info in obs.list()] == ["a"]


# ---------------------------------------------------------------- put and get


def test_put_get_bytes_round_trip(obs):
    """Bytes in several chunks come back equal; the info follows ADR-20."""
    data = os.urandom(5 * CHUNK + 7)
    info = obs.put("dir/file.bin", data, description="d", headers={"a": "1", "b": ["2", "3"]},
                   metadata={"k": "v"}, chunk_size=CHUNK)  # fmt: skip
    assert (info.size, info.chunks, info.digest) == (len(data), 6, _digest(data))
    assert info.bucket == obs.bucket and info.mtime is not None and not info.deleted
    assert obs.get("dir/file.bin") == data
    got = obs.get_info("dir/file.bin")
    assert got.headers == {"a": ("1",), "b": ("2", "3")} and got.metadata == {"k": "v"}
    assert got.options.max_chunk_size == CHUNK and got.description == "d"
    assert got.mtime is not None and got.nuid == info.nuid


def test_meta_json_is_the_adr_form(js, obs):
    """The stored meta is the ADR JSON on the base64url subject, rolled up, without mtime."""
    obs.put("x/y", b"abc", headers={"h": "v"}, chunk_size=CHUNK)
    raw = js.stream(obs.stream_name).get_last_msg_for_subject(_meta_subject(obs.bucket, "x/y"))
    body = json.loads(raw.data)
    assert raw.headers["Nats-Rollup"] == "sub"
    assert body == {
        "name": "x/y", "headers": {"h": ["v"]}, "options": {"max_chunk_size": CHUNK},
        "bucket": obs.bucket, "nuid": body["nuid"], "size": 3, "chunks": 1,
        "digest": _digest(b"abc"),
    }  # fmt: skip
    assert jsync.ObjectInfo.from_api(body).to_api() == body


def test_object_info_json_round_trip():
    """The ADR's example info reads and writes back key for key; Go's zero mtime reads as None."""
    wire = {
        "name": "object-name", "description": "object-desc", "metadata": {"owner": "infra"},
        "headers": {"key1": ["foo"], "key2": ["bar", "baz"]},
        "options": {"link": {"bucket": "link-to-bucket", "name": "link-to-name"},
                    "max_chunk_size": 8196},
        "bucket": "object-bucket", "nuid": "CkuyLEX4z2hbyjj1aWCfiH", "size": 344000,
        "chunks": 42, "digest": "SHA-256=abcdefghijklmnopqrstuvwxyz=", "deleted": True,
        "future_key": [1],
    }  # fmt: skip
    info = jsync.ObjectInfo.from_api(dict(wire, mtime="0001-01-01T00:00:00Z"))
    assert info.mtime is None and info.link == jsync.ObjectLink(
        bucket="link-to-bucket", name="link-to-name"
    )
    assert info.headers["key2"] == ("bar", "baz") and info.extra == {"future_key": [1]}
    assert info.to_api() == wire
    meta = jsync.ObjectMeta.from_api(wire)
    assert meta.to_api() == {k: wire[k] for k in ("name", "description", "metadata",
                                                   "headers", "options")}  # fmt: skip
    with_time = jsync.ObjectInfo.from_api(dict(wire, mtime="2024-01-02T03:04:05.123456789Z"))
    assert with_time.to_api()["mtime"] == "2024-01-02T03:04:05.123456789Z"
    assert "mtime" not in with_time.stored_json()


def test_put_str_file_and_empty(obs, tmp_path: Path):
    """A str is UTF-8, a binary file is read, an empty object has no chunks."""
    assert obs.put("s", "héllo").size == len("héllo".encode())
    assert obs.get("s") == "héllo".encode()
    path = tmp_path / "f.bin"
    data = os.urandom(3 * CHUNK)
    path.write_bytes(data)
    with path.open("rb") as f:
        assert obs.put("f", f, chunk_size=CHUNK).chunks == 3
    assert obs.get("f") == data
    empty = obs.put("empty", b"")
    assert (empty.size, empty.chunks, empty.digest) == (0, 0, _digest(b""))
    assert obs.get("empty") == b""


def test_put_streams_an_iterable_of_bytes_in_chunks_of_chunk_size(js, obs):
    """A generator (or any iterable) of bytes-like pieces of any sizes is stored as one
    object cut into chunks of ``chunk_size``; an empty one stores an empty object."""
    pieces = [os.urandom(n) for n in (1, CHUNK - 1, 0, 2 * CHUNK + 5, 7, CHUNK)]
    data = b"".join(pieces)
    info = obs.put("gen", (bytes(p) for p in pieces), chunk_size=CHUNK)
    assert (info.size, info.chunks, info.digest) == (len(data), 5, _digest(data))
    assert obs.get("gen") == data
    mixed = [b"ab", bytearray(b"cd"), memoryview(b"ef")]
    assert obs.put("mixed", iter(mixed), chunk_size=CHUNK).size == 6
    assert obs.get("mixed") == b"abcdef"
    assert obs.put("none", iter([]), chunk_size=CHUNK).chunks == 0
    assert obs.get("none") == b""


def test_an_iterable_of_str_or_ints_is_refused_before_sending(js, obs):
    """An iterable whose first item is not bytes-like raises TypeError before anything is sent."""
    for bad in (["text"], [1, 2], {"k": "v"}, [None, b"x"]):
        with pytest.raises(TypeError, match="bytes"):
            obs.put("a", bad)
    assert js.stream(obs.stream_name).info().state.messages == 0
    with pytest.raises(TypeError, match="NoneType"):  # not taken for the end: no object cut short
        obs.put("a", iter([b"x", None, b"y"]))
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.get_info("a")


class _ReadOnly:
    """A file that has ``read`` and nothing else (the ``read`` path of put)."""

    def __init__(self, f) -> None:
        self.read = f.read


@pytest.mark.parametrize("shape", ["readinto", "read"])
def test_a_non_blocking_file_with_no_data_ready_stores_nothing(obs, shape):
    """A read of a non-blocking pipe returns None when no data is ready: that is not the
    end of the file, so put raises instead of storing the object cut short."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    with open(read_end, "rb", buffering=0) as f, open(write_end, "wb", buffering=0) as w:
        w.write(b"x" * (CHUNK + 10))  # more is still to come: the writer stays open
        source = f if shape == "readinto" else _ReadOnly(f)
        with pytest.raises(BlockingIOError, match="non-blocking"):
            obs.put("cut", source, chunk_size=CHUNK)
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.get_info("cut")
    assert obs.status().size == 0  # the chunk sent before the error was removed


def test_get_into_streams_to_a_writer(obs, tmp_path: Path):
    """get_into writes every chunk to a file and returns the info."""
    data = os.urandom(10 * CHUNK + 1)
    obs.put("big", io.BytesIO(data), chunk_size=CHUNK)
    out = tmp_path / "out.bin"
    with out.open("wb") as f:
        info = obs.get_into("big", f)
    assert out.read_bytes() == data and info.chunks == 11


def test_bad_input_raises_before_sending(js, obs):
    """Bad names, data and chunk sizes raise typed errors and store nothing."""
    for bad in ("", None, 5):
        with pytest.raises(jsync.InvalidObjectNameError):
            obs.put(bad, b"x")
        with pytest.raises(jsync.InvalidObjectNameError):
            obs.get_info(bad)
    with pytest.raises(TypeError):
        obs.put("a", 12345)
    with pytest.raises(TypeError):
        obs.put("a", io.StringIO("text"))
    with pytest.raises(ValueError):
        obs.put("a", b"x", chunk_size=0)
    with pytest.raises(ValueError):
        obs.put("a", b"x", chunk_size=10 * 1024 * 1024)
    with pytest.raises(TypeError):
        obs.put("a", b"x", headers={"k": 1})
    assert js.stream(obs.stream_name).info().state.messages == 0


def test_missing_objects(obs):
    """get, get_info and delete of a name never stored raise ObjectNotFoundError."""
    for call in (obs.get, obs.get_info, obs.delete):
        with pytest.raises(jsync.ObjectNotFoundError):
            call("nope")


def test_overwrite_purges_old_chunks(js, obs):
    """A second put under a name replaces the object and purges the first one's chunks."""
    first = obs.put("o", os.urandom(4 * CHUNK), chunk_size=CHUNK)
    second = obs.put("o", b"new", chunk_size=CHUNK)
    assert first.nuid != second.nuid and obs.get("o") == b"new"
    assert _chunk_count(js, obs.bucket) == 1


def test_default_chunks_fit_a_server_with_a_small_max_payload(tmp_path):
    """On a server whose max payload is below 128 KiB, a put without chunk_size makes
    chunks of the max payload (not a ValueError about a chunk_size nobody gave)."""
    data = os.urandom(300_000)
    with NatsServer(directory=tmp_path / "srv", max_payload=65536) as server:
        with jsync.connect(server.url) as nc:
            obs = nc.jetstream().create_object_store(bucket="small")
            info = obs.put("o", data)
            assert (info.chunks, info.options.max_chunk_size) == (5, 65536)
            assert obs.get("o") == data
            with pytest.raises(ValueError, match="max payload"):
                obs.put("o", data, chunk_size=65537)


def test_failed_put_purges_its_chunks_and_keeps_the_old_object(js, bucket):
    """A put refused by the bucket's limit leaves no chunks and the name's old object."""
    obs = js.create_object_store(bucket=bucket, max_bytes=20 * CHUNK)
    obs.put("o", b"old")
    with pytest.raises(jsync.APIError):
        obs.put("o", os.urandom(40 * CHUNK), chunk_size=CHUNK)
    assert obs.get("o") == b"old" and _chunk_count(js, bucket) == 1


class _DeletesTheBucket(io.RawIOBase):
    """A file of ``chunks`` chunks whose read after ``after`` chunks deletes the bucket."""

    def __init__(self, js: jsync.JetStreamContext, bucket: str, chunks: int, after: int):
        self._js, self._bucket, self._chunks, self._after = js, bucket, chunks, after
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.reads == self._chunks:
            return 0
        self.reads += 1
        if self.reads == self._after:
            self._js.delete_object_store(self._bucket)
        buffer[:] = b"x" * len(buffer)
        return len(buffer)


def test_a_put_whose_bucket_is_deleted_under_it_raises_bucket_not_found(js, bucket):
    """A put whose bucket is deleted between two chunks raises ObjectStoreNotFoundError
    (not the NoRespondersError of its next chunk), with no note about chunks left behind:
    they went with the bucket."""
    obs = js.create_object_store(bucket=bucket)
    source = _DeletesTheBucket(js, bucket, chunks=20, after=5)
    with pytest.raises(jsync.ObjectStoreNotFoundError, match=repr(bucket)) as caught:
        obs.put("o", source, chunk_size=CHUNK)
    assert not getattr(caught.value, "__notes__", None)
    assert bucket not in list(js.object_store_names())


def test_digest_mismatch_is_detected(js, obs):
    """A meta whose digest does not match the chunks makes get raise DigestMismatchError."""
    info = obs.put("o", b"payload")
    wrong = dict(info.stored_json(), digest=_digest(b"other"))
    js.publish(_meta_subject(obs.bucket, "o"), json.dumps(wrong).encode(),
               headers={"Nats-Rollup": "sub"})  # fmt: skip
    with pytest.raises(jsync.DigestMismatchError, match="hash to"):
        obs.get("o")


def test_size_mismatch_is_detected(js, obs):
    """A meta promising more chunks than stored makes get raise ObjectSizeMismatchError."""
    info = obs.put("o", b"a" * (2 * CHUNK), chunk_size=CHUNK)
    wrong = dict(info.stored_json(), chunks=1, size=CHUNK)
    js.publish(_meta_subject(obs.bucket, "o"), json.dumps(wrong).encode(),
               headers={"Nats-Rollup": "sub"})  # fmt: skip
    with pytest.raises(jsync.ObjectSizeMismatchError, match="1 more stored"):
        obs.get("o")
    js.publish(f"$O.{obs.bucket}.C.{info.nuid}", b"x")
    short = dict(info.stored_json(), chunks=5, size=5 * CHUNK)
    js.publish(_meta_subject(obs.bucket, "o"), json.dumps(short).encode(),
               headers={"Nats-Rollup": "sub"})  # fmt: skip
    with pytest.raises(jsync.ObjectSizeMismatchError, match="read 3 chunks"):
        obs.get("o")


def test_bad_meta_is_reported(js, obs):
    """A meta that is not JSON, or has a digest not in the ADR form, raises BadObjectMetaError."""
    js.publish(_meta_subject(obs.bucket, "o"), b"not json")
    with pytest.raises(jsync.BadObjectMetaError):
        obs.get_info("o")
    info = obs.put("p", b"abc")
    for digest in ("MD5=abc", "SHA-256=***", "SHA-256=YWJj"):
        bad = dict(info.stored_json(), digest=digest)
        js.publish(_meta_subject(obs.bucket, "p"), json.dumps(bad).encode(),
                   headers={"Nats-Rollup": "sub"})  # fmt: skip
        with pytest.raises(jsync.BadObjectMetaError):
            obs.get("p")


def test_a_meta_whose_nuid_is_a_wildcard_touches_no_other_object(js, obs):
    """A meta another client wrote with nuid ">" (or "*", "a.>") names every object's chunks:
    get and delete raise BadObjectMetaError and a put over it purges nothing else."""
    obs.put("keep", b"precious", chunk_size=4)
    info = obs.put("bad", b"x")
    for nuid in (">", "*", "a.>", "a b", "a..b"):
        bad = dict(info.stored_json(), nuid=nuid)
        js.publish(_meta_subject(obs.bucket, "bad"), json.dumps(bad).encode(),
                   headers={"Nats-Rollup": "sub"})  # fmt: skip
        for call in (obs.get, obs.delete):
            with pytest.raises(jsync.BadObjectMetaError, match="nuid"):
                call("bad")
        assert obs.get("keep") == b"precious"
    obs.put("bad", b"replaced")
    assert (obs.get("bad"), obs.get("keep")) == (b"replaced", b"precious")


def test_digest_without_padding_or_in_standard_base64_is_read(js, obs):
    """A digest stored without its "=" padding, or in standard base64 (as nats.js wrote), reads."""
    data = os.urandom(3 * CHUNK)
    info = obs.put("o", data, chunk_size=CHUNK)
    raw = hashlib.sha256(data).digest()
    for encoded in (base64.urlsafe_b64encode(raw), base64.b64encode(raw)):
        for digest in (encoded.decode(), encoded.decode().rstrip("=")):
            foreign = dict(info.stored_json(), digest="SHA-256=" + digest)
            js.publish(_meta_subject(obs.bucket, "o"), json.dumps(foreign).encode(),
                       headers={"Nats-Rollup": "sub"})  # fmt: skip
            assert obs.get("o") == data
    wrong = dict(info.stored_json(), digest="SHA-256=" + _digest(b"x")[8:].rstrip("="))
    js.publish(_meta_subject(obs.bucket, "o"), json.dumps(wrong).encode(),
               headers={"Nats-Rollup": "sub"})  # fmt: skip
    with pytest.raises(jsync.DigestMismatchError):
        obs.get("o")


# ---------------------------------------------------------------- delete and update_meta


def test_delete_marks_deleted_and_purges(js, obs):
    """delete hides the object, keeps a deleted meta, purges the chunks; twice is a no-op."""
    obs.put("o", os.urandom(3 * CHUNK), chunk_size=CHUNK)
    obs.delete("o")
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.get_info("o")
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.get("o")
    gone = obs.get_info("o", show_deleted=True)
    assert gone.deleted and (gone.size, gone.chunks, gone.digest) == (0, 0, None)
    assert _chunk_count(js, obs.bucket) == 0
    obs.delete("o")


def test_update_meta_and_rename(obs):
    """update_meta changes description/headers/metadata; a new name moves the object."""
    data = os.urandom(2 * CHUNK)
    obs.put("old", data, chunk_size=CHUNK)
    meta = jsync.ObjectMeta(name="old", description="d", metadata={"a": "b"})
    info = obs.update_meta("old", meta)
    assert info.description == "d" and obs.get_info("old").metadata == {"a": "b"}
    obs.update_meta("old", jsync.ObjectMeta(name="new", description="moved"))
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.get_info("old", show_deleted=True)
    assert obs.get("new") == data and obs.get_info("new").description == "moved"


def test_update_meta_rules(obs):
    """Renaming onto a live object fails; onto a deleted one works; a deleted one cannot change."""
    obs.put("a", b"1")
    obs.put("b", b"2")
    with pytest.raises(jsync.ObjectAlreadyExistsError):
        obs.update_meta("a", jsync.ObjectMeta(name="b"))
    obs.delete("b")
    obs.update_meta("a", jsync.ObjectMeta(name="b"))
    assert obs.get("b") == b"1"
    with pytest.raises(jsync.ObjectNotFoundError):
        obs.update_meta("a", jsync.ObjectMeta(name="c"))


# ---------------------------------------------------------------- links


def test_links_in_the_same_and_another_bucket(js, obs, bucket):
    """A get of a link reads the linked object, in this bucket or another."""
    other_name = bucket + "X"
    other = js.create_object_store(bucket=other_name)
    try:
        target = other.put("t", b"target bytes")
        local = obs.put("l", b"local bytes")
        link = obs.add_link("to-other", target)
        assert link.is_link and link.link == jsync.ObjectLink(bucket=other_name, name="t")
        assert obs.get("to-other") == b"target bytes"
        obs.add_link("to-local", local)
        assert obs.get("to-local") == b"local bytes"
        bucket_link = obs.add_bucket_link("whole", other)
        assert bucket_link.link == jsync.ObjectLink(bucket=other_name)
        with pytest.raises(jsync.LinkIsABucketError):
            obs.get("whole")
    finally:
        js.delete_object_store(other_name)


def test_link_rules(obs):
    """No link to a link or a deleted object; no link over an object; no put over a link."""
    target = obs.put("t", b"x")
    link = obs.add_link("l", target)
    with pytest.raises(jsync.ObjectLinkError):
        obs.add_link("l2", link)
    with pytest.raises(jsync.ObjectAlreadyExistsError):
        obs.add_link("t", target)
    with pytest.raises(jsync.ObjectLinkError):
        obs.put("l", b"over the link")
    obs.add_link("l", target)  # a link may replace a link
    obs.delete("t")
    with pytest.raises(jsync.ObjectLinkError):
        obs.add_link("l3", obs.get_info("t", show_deleted=True))
    obs.add_link("t", obs.put("u", b"y"))  # a deleted object's name may become a link
    assert obs.get("t") == b"y"


def test_no_link_to_an_object_deleted_since_its_info_was_read(js, obs, bucket):
    """An info read before its object was deleted (or made a link) links to nothing: add_link
    asks the target's bucket and refuses, in the same bucket and in another."""
    target = obs.put("t", b"x")
    other = js.create_object_store(bucket=bucket + "_2")
    try:
        elsewhere = other.put("e", b"y")
        obs.delete("t")
        other.delete("e")
        for stale in (target, elsewhere):
            with pytest.raises(jsync.ObjectLinkError, match="deleted"):
                obs.add_link("l", stale)
        with pytest.raises(jsync.ObjectNotFoundError):
            obs.get_info("l", show_deleted=True)
        replaced = obs.put("r", b"z")
        obs.delete("r")
        obs.add_link("r", other.put("f", b"w"))
        with pytest.raises(jsync.ObjectLinkError, match="is a link"):
            obs.add_link("l", replaced)
    finally:
        js.delete_object_store(bucket + "_2")


# ---------------------------------------------------------------- list and watch


def test_list_skips_deleted_objects(obs):
    """list() gives the newest info of each live object; show_deleted adds the deleted."""
    assert obs.list() == []
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.put("a", b"3")
    obs.delete("b")
    listed = obs.list()
    assert [(i.name, i.size) for i in listed] == [("a", 1)]
    assert listed[0].mtime is not None
    assert sorted((i.name, i.deleted) for i in obs.list(show_deleted=True)) == [
        ("a", False), ("b", True),
    ]  # fmt: skip


def test_list_whose_pull_the_server_drops_still_lists_within_its_timeout(nc, obs, monkeypatch):
    """The first pull of list() lost without a word (as when its consumer is deleted while
    the request is on its way): its heartbeats come at a quarter of its timeout, so the
    silence is noticed and the consumer replaced in time (not after 2 x 15 s)."""
    obs.put("a", b"1")
    dropped = drop_the_first_pull(nc, monkeypatch)
    assert [i.name for i in obs.list(timeout=8)] == ["a"]
    assert dropped, "no pull was dropped"


def test_get_whose_pull_the_server_drops_still_reads_within_its_timeout(nc, obs, monkeypatch):
    """get()'s first pull of chunks lost without a word: its heartbeats come at a quarter
    of its timeout, so the consumer is replaced and the object read in time."""
    obs.put("a", b"x" * 300_000)
    dropped = drop_the_first_pull(nc, monkeypatch)
    assert obs.get("a", timeout=8) == b"x" * 300_000
    assert dropped, "no pull was dropped"


def test_watch_initial_values_marker_then_updates(obs):
    """A watcher yields the current infos, None, then each change in order."""
    obs.put("a", b"1")
    obs.put("b", b"2")
    with obs.watch() as w:
        assert [w.next(5).name, w.next(5).name] == ["a", "b"]
        assert w.next(5) is None
        obs.put("c", b"3")
        obs.delete("a")
        got = w.next(5)
        assert (got.name, got.deleted) == ("c", False)
        got = w.next(5)
        assert (got.name, got.deleted) == ("a", True)
        with pytest.raises(jsync.TimeoutError):
            w.next(0.2)


def test_watch_empty_bucket_and_options(obs):
    """Empty: None at once; ignore_deletes skips deletes; updates_only skips the present.

    Meta messages roll up, so ``include_history`` sees the newest meta of each name too.
    """
    with obs.watch(ignore_deletes=True) as w:
        assert w.next(5) is None
        obs.put("a", b"1")
        # read before the delete: the delete's meta rolls up the put's, so a watcher
        # that had not read it yet would rightly never see "a"
        assert w.next(5).name == "a"
        obs.delete("a")
        obs.put("b", b"2")
        assert w.next(5).name == "b"
    with obs.watch(include_history=True) as w:
        seen = [w.next(5) for _ in range(2)]
        assert [(i.name, i.deleted) for i in seen] == [("a", True), ("b", False)]
        assert w.next(5) is None
    with obs.watch(updates_only=True) as w:
        obs.put("c", b"3")
        assert w.next(5).name == "c"


def test_watch_iterates_until_stopped(obs):
    """Iterating a watcher yields entries; stop() ends the iteration."""
    obs.put("a", b"1")
    w = obs.watch()
    got = []
    for info in w:
        got.append(info)
        if info is None:
            w.stop()
    assert [i.name if i else None for i in got] == ["a", None]
    with pytest.raises(jsync.IteratorClosedError):
        w.next(1)


def test_errors_pickle():
    """Object Store errors survive pickling (Spark ships them) with their type and text."""
    for exc in (
        jsync.ObjectNotFoundError("x"),
        jsync.DigestMismatchError("d"),
        jsync.ObjectStoreNotFoundError(404, 10059, "object store 'b' not found"),
    ):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and str(again) == str(exc)


def test_watch_survives_a_server_restart(restartable_server):
    """A watcher keeps delivering, in order, the changes made after a server restart."""
    with jsync.connect(restartable_server.url) as nc:
        obs = nc.jetstream().create_object_store(bucket="RESTART")
        obs.put("before", b"1")
        with obs.watch() as w:
            assert w.next(5).name == "before" and w.next(5) is None
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=15, message="no reconnect")
            wait_for(lambda: obs.put("after", b"2"), timeout=15, ignore=jsync.NatsError)
            got = w.next(30)
            assert (got.name, got.size) == ("after", 1)


def _got(obs: jsync.ObjectStore, name: str) -> bytes | None:
    """The object, or None when the connection it was asked on was given up."""
    try:
        return obs.get(name, timeout=10)
    except jsync.ConnectionLostError:
        return None


@pytest.mark.timeout(120)
def test_get_interrupted_at_any_point_ends_and_leaves_the_store_usable(shared_server):
    """Ctrl-C at each point in turn of a get on the main thread (it reads through an
    ordered consumer, stopped on the way out): the call ends, nothing it used stays
    locked, and the next get returns the object."""
    # reconnects at once: some points give the connection up (bytes received, not parsed)
    with jsync.connect(shared_server.url, reconnect_time_wait=0.01) as nc:
        js = nc.jetstream()
        bucket = unique_stream_name("OBJINT")
        obs = js.create_object_store(bucket=bucket)
        try:
            data = os.urandom(200_000)  # two chunks
            obs.put("o", data)
            point = 0
            while True:
                point += 1
                try:
                    done = not interrupted_at(point, lambda: obs.get("o"))
                except jsync.ConnectionLostError:
                    done = False
                wait_for(lambda: _got(obs, "o") == data, timeout=30, message=f"a get ({point})")
                if done:
                    break
            assert point > 100
        finally:
            js.delete_object_store(bucket)
