"""Key-Value against a model: random writes, reads, watches, restarts and lost consumers.

A Hypothesis state machine drives one fresh bucket per example, on a server
this module owns (it restarts it) and on an R3 bucket of a 3-node cluster,
and compares every answer with ``tests.fixtures.models.BucketModel``:
values, revisions, history depth, delete and purge markers, and which error
each call must raise. A watcher started at any point must deliver exactly
the model's initial entries before its ``None`` marker, then every update,
in order, whatever happened to its server-side consumer meanwhile. Updates
written while the watcher is connected must all arrive, even those the
bucket's history dropped before the next read; only those written while it
was cut off (right after a fault, before its new link) may be missing when
the bucket no longer holds them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

import jetstream_sync
from jetstream_sync import (
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueEntry,
    KeyWrongLastSequenceError,
)
from tests.fixtures.cluster import NatsCluster
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.models import BucketModel, Op, Revision, run_settings
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

HISTORY = 3
#: A key near the size the server takes in one control line (4,096 bytes).
LONG_KEY = ".".join(["long-but-legal_key=/"] * 120)
KEYS = ["a", "a.b", "-", "_", "/", "=", "a.b.c-d_e/f=g", LONG_KEY]
WATCH_MODES = ["latest", "history", "updates_only"]
#: Seconds a watcher may take to deliver an entry the model expects.
WATCH_WAIT = 15.0
#: Seconds to wait for updates the bucket dropped meanwhile (they may come or not).
DROPPED_WAIT = 1.0

keys = st.sampled_from(KEYS)
values = st.binary(max_size=6)
#: Writes right after a fault, to few keys: a key written twice while the watcher
#: recovers is what tells a resumed watch from one that restarted at the latest values.
bursts = st.lists(st.tuples(st.sampled_from(KEYS[:2]), values), max_size=4)
#: Updates written before the watcher's next read: more than ``HISTORY`` of a key,
#: so that a watcher which only catches up when read would miss some.
batches = st.lists(st.tuples(st.sampled_from(KEYS[:2]), values), min_size=1, max_size=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A JetStream server for this module only: the machines restart it."""
    server = NatsServer(directory=tmp_path_factory.mktemp("kv-model") / "server").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server: NatsServer) -> Iterator[jetstream_sync.Client]:
    """A client that reconnects at once after a restart."""
    with jetstream_sync.connect(
        server.url, reconnect_time_wait=0.1, max_reconnect_attempts=600
    ) as nc:
        yield nc


@pytest.fixture(scope="module")
def cluster_client(cluster: NatsCluster) -> Iterator[jetstream_sync.Client]:
    """A client of the 3-node cluster."""
    with jetstream_sync.connect(cluster.urls, reconnect_time_wait=0.1) as nc:
        yield nc


def _short(key: str) -> str:
    return key if len(key) < 40 else f"{key[:20]}...({len(key)} chars)"


def _seen(entry: KeyValueEntry | None) -> tuple[str, int, str, bytes] | None:
    """An entry as a comparable tuple (the long key shortened for messages)."""
    if entry is None:
        return None
    return (_short(entry.key), entry.revision, entry.operation.value, entry.value)


def _want(expected: Revision) -> tuple[str, int, str, bytes]:
    """The model's revision as the same tuple."""
    return (_short(expected.key), expected.revision, expected.op.value, expected.value)


class BucketMachine(RuleBasedStateMachine):
    """One bucket, its model, at most one watcher and the faults that hit it."""

    def __init__(
        self, server: NatsServer | None, nc: jetstream_sync.Client, restarts: int, replicas: int
    ) -> None:
        super().__init__()
        self.server = server
        self.nc = nc
        self.js = nc.jetstream(timeout=10.0)
        self.name = unique_stream_name("KVMODEL")
        self.kv = self.js.create_key_value(bucket=self.name, history=HISTORY, replicas=replicas)
        self.model = BucketModel(history=HISTORY)
        self.restarts_left = restarts
        self.watcher: jetstream_sync.KeyWatcher | None = None
        self.ignore_deletes = False
        self.expected: list[Revision] = []  # what the watcher still owes, in order
        self.given_up: set[int] = set()  # dropped revisions it did not deliver
        self.checking = False  # a watcher check is under way (or failed)

    # ----------------------------------------------------------- writes

    def _wrote(self, key: str, op: Op, value: bytes, revision: int) -> None:
        entry = self.model.write(key, op, value)
        assert revision == entry.revision, f"{op.value} got revision {revision}, not {entry}"
        if self.watcher is not None and not (self.ignore_deletes and op is not Op.PUT):
            self.expected.append(entry)

    @rule(key=keys, value=values)
    def put(self, key: str, value: bytes) -> None:
        """A put always succeeds and takes the next revision."""
        self._wrote(key, Op.PUT, value, self.kv.put(key, value))

    @rule(key=keys, value=values)
    def create(self, key: str, value: bytes) -> None:
        """A create succeeds unless the key holds a value (over a marker too)."""
        if self.model.has_value(key):
            with pytest.raises(KeyExistsError):
                self.kv.create(key, value)
        else:
            self._wrote(key, Op.PUT, value, self.kv.create(key, value))

    @rule(key=keys, value=values, off=st.integers(-2, 3))
    def update(self, key: str, value: bytes, off: int) -> None:
        """``off == 0`` is the right last revision; any other is a wrong one."""
        last = self.model.last_revision(key) + off
        if off == 0:
            self._wrote(key, Op.PUT, value, self.kv.update(key, value, last))
        elif last >= 0:
            with pytest.raises(KeyWrongLastSequenceError):
                self.kv.update(key, value, last)

    @rule(key=keys, conditional=st.booleans(), off=st.integers(-1, 1))
    def delete(self, key: str, conditional: bool, off: int) -> None:
        """A delete leaves a DEL marker; with ``last``, only on the right revision."""
        last = self.model.last_revision(key) + off if conditional else None
        if last is not None and last < 0:
            return
        if last is not None and off != 0:
            with pytest.raises(KeyWrongLastSequenceError):
                self.kv.delete(key, last=last)
        else:
            self._wrote(key, Op.DEL, b"", self.kv.delete(key, last=last))

    @rule(key=keys)
    def purge(self, key: str) -> None:
        """A purge leaves only its PURGE marker."""
        self._wrote(key, Op.PURGE, b"", self.kv.purge(key))

    # ----------------------------------------------------------- reads

    @rule(key=keys)
    def get(self, key: str) -> None:
        """The latest revision, a marker as KeyDeletedError, or KeyNotFoundError."""
        self._check_get(key, None, self.model.latest(key))

    @rule(key=keys, data=st.data())
    def get_revision(self, key: str, data: st.DataObject) -> None:
        """Any revision number: the key's entry if still held there, else KeyNotFoundError."""
        revision = data.draw(st.integers(1, self.model.last_seq + 2), label="revision")
        found = self.model.at(revision)
        self._check_get(key, revision, found if found is not None and found.key == key else None)

    def _check_get(self, key: str, revision: int | None, expected: Revision | None) -> None:
        if expected is None:
            with pytest.raises(KeyNotFoundError) as info:
                self.kv.get(key, revision=revision)
            assert type(info.value) is KeyNotFoundError, f"{info.value!r}: not a marker"
        elif expected.op is not Op.PUT:
            with pytest.raises(KeyDeletedError) as deleted:
                self.kv.get(key, revision=revision)
            assert _seen(deleted.value.entry) == _want(expected)
        else:
            entry = self.kv.get(key, revision=revision)
            assert _seen(entry) == _want(expected)

    @rule()
    def list_keys(self) -> None:
        """The keys holding a value, in the order of their latest revisions."""
        assert self.kv.keys() == self.model.keys()

    @rule(key=keys)
    def history(self, key: str) -> None:
        """The key's last ``HISTORY`` revisions, markers included, oldest first."""
        kept = self.model.kept.get(key, [])
        if not kept:
            with pytest.raises(KeyNotFoundError):
                self.kv.history(key)
            return
        assert [_seen(e) for e in self.kv.history(key)] == [_want(e) for e in kept]

    @rule()
    def status(self) -> None:
        """The bucket holds as many entries as the model keeps."""
        assert self.kv.status().values == len(self.model.stored())

    # ----------------------------------------------------------- the watcher

    @initialize(mode=st.sampled_from(["none", *WATCH_MODES]), ignore=st.booleans())
    def first_watch(self, mode: str, ignore: bool) -> None:
        """Most examples watch from the start, so that faults hit a watcher."""
        if mode != "none":
            self.start_watch(mode, ignore)

    @precondition(lambda self: self.watcher is None)
    @rule(mode=st.sampled_from(WATCH_MODES), ignore=st.booleans())
    def start_watch(self, mode: str, ignore: bool) -> None:
        """A watcher delivers the model's initial entries, then None, then the updates."""
        self.watcher = self.kv.watch(
            include_history=mode == "history",
            updates_only=mode == "updates_only",
            ignore_deletes=ignore,
        )
        self.ignore_deletes = ignore
        initial = []
        if mode != "updates_only":
            initial = self.model.initial(include_history=mode == "history", ignore_deletes=ignore)
        got = []
        while (entry := self.watcher.next(timeout=WATCH_WAIT)) is not None:
            got.append(entry)
        assert [_seen(e) for e in got] == [_want(e) for e in initial]
        self.expected, self.given_up = [], set()

    def _dropped(self, entry: Revision) -> bool:
        """Whether ``entry`` may be missing: the bucket no longer holds it (pushed out by
        history, or purged). The server's consumer skips a message removed before it was
        delivered, whether the watcher's link was cut off then (a new link starts past it)
        or only behind (a loaded server stores the next write before it delivers this one)."""
        return self.model.at(entry.revision) is None

    def _next(self, timeout: float) -> KeyValueEntry | None:
        """The watcher's next entry, past late ones the model already gave up on."""
        assert self.watcher is not None
        while True:
            entry = self.watcher.next(timeout=timeout)
            if entry is None or entry.revision not in self.given_up:
                return entry

    @precondition(lambda self: self.watcher is not None)
    @rule()
    def catch_up(self) -> None:
        """Every update since the watch started arrives, once and in order.

        An update the bucket dropped before the server delivered it may be
        missing, as docs/key-value.md says: a watcher cannot deliver what the
        bucket no longer holds.
        """
        self.checking = True  # stays set if a check fails: teardown then leaves it be
        while self.expected:
            optional = all(self._dropped(e) for e in self.expected)
            try:
                entry = self._next(DROPPED_WAIT if optional else WATCH_WAIT)
            except jetstream_sync.TimeoutError:
                if optional:
                    self.given_up.update(e.revision for e in self.expected)
                    self.expected.clear()
                    break
                raise AssertionError(
                    f"the watcher never delivered {[_want(e) for e in self.expected]}"
                ) from None
            while (
                len(self.expected) > 1
                and self._dropped(self.expected[0])
                and _seen(entry) != _want(self.expected[0])
            ):
                self.given_up.add(self.expected.pop(0).revision)
            assert _seen(entry) == _want(self.expected[0]), (
                f"the watcher gave {_seen(entry)} where the model has "
                f"{_want(self.expected[0])} (owed: {[_want(e) for e in self.expected]})"
            )
            self.expected.pop(0)
        self.checking = False

    @precondition(lambda self: self.watcher is not None)
    @rule()
    def stop_watch(self) -> None:
        """After every update it owes, the watcher has nothing more to give."""
        self.catch_up()
        assert self.watcher is not None
        with pytest.raises(jetstream_sync.TimeoutError):
            entry = self._next(0.2)
            raise AssertionError(f"the watcher gave {_seen(entry)}, which nobody wrote")
        self.watcher.stop()
        self.watcher = None

    # ----------------------------------------------------------- faults

    def _burst(self, writes: list[tuple[str, bytes]]) -> None:
        """Puts, one after the other."""
        for key, value in writes:
            revision = self.kv.put(key, value)
            self._wrote(key, Op.PUT, value, revision)

    def _links(self) -> set[str]:
        return set(self.js.consumer_names(self.kv.stream_name))

    def _wait_for_link(self, old: set[str]) -> None:
        """Until the watcher has a new link with a pull waiting on it."""

        def linked() -> bool:
            now = self._links() - old
            return (
                len(now) == 1 and self.js.consumer_info(self.kv.stream_name, *now).num_waiting > 0
            )

        wait_for(
            linked,
            timeout=WATCH_WAIT,
            ignore=jetstream_sync.ConsumerNotFoundError,
            message=lambda: f"the watcher to replace its consumer {sorted(old)} on its own",
        )

    @precondition(lambda self: self.watcher is not None)
    @rule(writes=bursts, wait=st.booleans())
    def delete_watch_consumer(self, writes: list[tuple[str, bytes]], wait: bool) -> None:
        """An operator (or a limit) deletes the watcher's consumer under it.

        ``wait``: the writes come once the watcher has replaced it (all must
        arrive); otherwise they land during the replacement.
        """
        old = self._links()
        for name in old:
            with contextlib.suppress(jetstream_sync.ConsumerNotFoundError):
                self.js.delete_consumer(self.kv.stream_name, name)
        if wait:
            self._wait_for_link(old)
        self._burst(writes)
        self._wait_for_link(old)

    @precondition(lambda self: self.watcher is not None)
    @rule(writes=batches)
    def write_before_next_read(self, writes: list[tuple[str, bytes]]) -> None:
        """Several updates, nothing read meanwhile: every one the bucket holds arrives."""
        self._burst(writes)

    @precondition(lambda self: self.restarts_left > 0)
    @rule(writes=bursts)
    def restart_server(self, writes: list[tuple[str, bytes]]) -> None:
        """The server restarts; the bucket's store survives, the client reconnects."""
        assert self.server is not None
        self.restarts_left -= 1
        self.server.restart()
        wait_for(lambda: self.nc.is_connected, timeout=20, message="no reconnect")
        self._burst(writes)
        if self.watcher is not None:
            self._wait_for_link(set())

    # ----------------------------------------------------------- the end

    def teardown(self) -> None:
        try:
            if self.watcher is not None and not self.checking:
                self.stop_watch()
        finally:
            if self.watcher is not None:
                self.watcher.stop()
            with contextlib.suppress(jetstream_sync.NatsError):
                self.js.delete_key_value(self.name)


def _run(
    server: NatsServer | None,
    nc: jetstream_sync.Client,
    config: pytest.Config,
    long: bool,
    replicas: int = 1,
) -> None:
    restarts = 0 if server is None else 3 if long else 1
    # Examples are cheap on one server (about 0.3 s): the suite runs more than the
    # default 15 there, and fewer on the cluster, where each bucket is an R3 stream.
    options = run_settings(config, long=long, examples=50 if replicas == 1 else 10)
    run_state_machine_as_test(
        lambda: BucketMachine(server, nc, restarts, replicas), settings=options
    )


@pytest.mark.timeout(600)  # a failure's shrinking replays many examples
def test_kv_matches_the_model(server, client, pytestconfig):
    """Random KV calls, watches, restarts and consumer deletions agree with the model."""
    _run(server, client, pytestconfig, long=False)


@pytest.mark.timeout(600)
def test_r3_kv_matches_the_model(cluster_client, pytestconfig):
    """The same on an R3 bucket of a 3-node cluster (deletions and batches, no restarts)."""
    _run(None, cluster_client, pytestconfig, long=False, replicas=3)


@pytest.mark.model_long
@pytest.mark.timeout(3 * 3600)
def test_kv_matches_the_model_long(server, client, pytestconfig):
    """The long hunt of the same machine (``pytest -m model_long``)."""
    _run(server, client, pytestconfig, long=True)
