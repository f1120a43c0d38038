"""A pull consumer against a model: random publishes, fetches, acks, naks, terms and waits.

A Hypothesis state machine drives one fresh stream and explicit-ack pull
consumer per example (short ``ack_wait``, small ``max_deliver``) and checks
every delivery with ``tests.fixtures.models.ConsumerModel``: nothing is
delivered after an ack or a term, nor before its ack wait or nak delay ran
out, nor more than ``max_deliver`` times; ``num_delivered`` counts every
delivery the client handed out; at the end every message was acked, termed
or delivered ``max_deliver`` times. A second answer to a message raises
``MsgAlreadyAckedError`` locally.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

import jetstream_sync
from jetstream_sync import Msg, MsgAlreadyAckedError
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.models import ConsumerModel, ModelError, State, run_settings
from tests.fixtures.server import NatsServer

ACK_WAIT = 1.0
MAX_DELIVER = 3
#: An answer is only sent while this much of the ack wait is left, so that it
#: reaches the server before the message can be handed out again.
MARGIN = 0.4
#: How long the final drain may take to collect what the server still owes.
DRAIN_SECONDS = ACK_WAIT * MAX_DELIVER + 10.0

indexes = st.integers(0, 63)


@pytest.fixture(scope="module")
def client(shared_server: NatsServer) -> Iterator[jetstream_sync.Client]:
    """One client for every example of this module."""
    with jetstream_sync.connect(shared_server.url) as nc:
        yield nc


class ConsumerMachine(RuleBasedStateMachine):
    """One stream, one pull consumer, the messages fetched and the model."""

    def __init__(self, nc: jetstream_sync.Client) -> None:
        super().__init__()
        self.js = nc.jetstream()
        self.name = unique_stream_name("PULLMODEL")
        self.subject = f"{self.name}.x"
        stream = self.js.create_stream(name=self.name, subjects=[self.subject])
        self.consumer = stream.create_consumer(
            durable_name="model", ack_wait=ACK_WAIT, max_deliver=MAX_DELIVER
        )
        self.model = ConsumerModel(ack_wait=ACK_WAIT, max_deliver=MAX_DELIVER)
        self.held: dict[int, Msg] = {}  # the latest delivery of each message
        self.answered: list[Msg] = []  # deliveries acked, nak'd or termed
        self.checking = False  # a delivery check is under way (or failed)

    # ------------------------------------------------------------- the stream

    @rule(n=st.integers(1, 3))
    def publish(self, n: int) -> None:
        """Publish ``n`` messages; the model learns their sequences."""
        for _ in range(n):
            seq = self.js.publish(self.subject, b"%d" % len(self.model.messages)).seq
            self.model.published(seq)

    # ------------------------------------------------------------- deliveries

    def _fetch(self, batch: int, timeout: float) -> list[Msg]:
        start = time.monotonic()
        msgs = self.consumer.fetch(batch, timeout=timeout)
        end = time.monotonic()
        self.checking = True  # stays set if a check fails: teardown then only cleans up
        assert len(msgs) <= batch
        for msg in msgs:
            meta = msg.metadata
            self.model.delivered(meta.sequence.stream, meta.num_delivered, start, end)
            self.held[meta.sequence.stream] = msg
        self.checking = False
        return msgs

    @rule(batch=st.integers(1, 4), timeout=st.sampled_from([0.15, 0.3]))
    def fetch(self, batch: int, timeout: float) -> None:
        """A short fetch; every delivery is checked by the model."""
        self._fetch(batch, timeout)

    # ------------------------------------------------------------- answers

    def _answerable(self) -> list[int]:
        """The held messages the server still waits an answer for, with time to spare."""
        now = time.monotonic()
        return [s for s in sorted(self.held) if self.model.answerable(s, now, MARGIN)]

    def _pick(self, index: int) -> tuple[int, Msg] | None:
        """One of ``_answerable()`` chosen by ``index``, or None when there is none.

        What is answerable depends on the clock, so the choice is an index
        drawn beforehand: Hypothesis needs the same draws on every replay.
        """
        seqs = self._answerable()
        if not seqs:
            return None
        seq = seqs[index % len(seqs)]
        return seq, self.held[seq]

    @rule(index=indexes, sync=st.booleans())
    def ack(self, index: int, sync: bool) -> None:
        """Ack (fire and forget, or confirmed) a message the server waits on."""
        picked = self._pick(index)
        if picked is not None:
            seq, msg = picked
            msg.ack_sync() if sync else msg.ack()
            self.model.answered(seq, State.ACKED, time.monotonic())
            self.answered.append(msg)

    @rule(index=indexes, delay=st.sampled_from([None, 0.0, 0.3]))
    def nak(self, index: int, delay: float | None) -> None:
        """Nak a message, at once, with ``delay=0`` or with a short delay."""
        picked = self._pick(index)
        if picked is not None:
            seq, msg = picked
            now = time.monotonic()
            msg.nak() if delay is None else msg.nak(delay=delay)
            self.model.answered(seq, State.NAKED, now, delay or 0.0)
            self.answered.append(msg)

    @rule(index=indexes, reason=st.sampled_from([None, "bad input"]))
    def term(self, index: int, reason: str | None) -> None:
        """Terminate a message: it must never come again."""
        picked = self._pick(index)
        if picked is not None:
            seq, msg = picked
            msg.term(reason=reason)
            self.model.answered(seq, State.TERMED, time.monotonic())
            self.answered.append(msg)

    @rule(index=indexes)
    def in_progress(self, index: int) -> None:
        """Restart a message's ack wait."""
        picked = self._pick(index)
        if picked is not None:
            seq, msg = picked
            now = time.monotonic()
            msg.in_progress()
            self.model.answered(seq, State.OUT, now)

    @rule(index=indexes, how=st.sampled_from(["ack", "ack_sync", "nak", "term", "in_progress"]))
    def answer_again(self, index: int, how: str) -> None:
        """A second answer to one delivery raises locally and sends nothing."""
        if self.answered:
            msg = self.answered[index % len(self.answered)]
            with pytest.raises(MsgAlreadyAckedError):
                getattr(msg, how)()

    # ------------------------------------------------------------- the end

    def teardown(self) -> None:
        """Everything still owed arrives (then it is acked) before the drain's deadline."""
        try:
            deadline = time.monotonic() + DRAIN_SECONDS
            if self.checking:
                return
            while self.model.unsettled() and time.monotonic() < deadline:
                for msg in self._fetch(50, 1.0):
                    msg.ack_sync()
                    self.model.answered(msg.metadata.sequence.stream, State.ACKED, 0.0)
            owed = [(m.seq, m.state.value, m.deliveries) for m in self.model.unsettled()]
            if owed:
                raise ModelError(f"never (re)delivered within {DRAIN_SECONDS} s: {owed}")
        finally:
            self.js.delete_stream(self.name)


def _run(nc: jetstream_sync.Client, config: pytest.Config, long: bool) -> None:
    run_state_machine_as_test(lambda: ConsumerMachine(nc), settings=run_settings(config, long=long))


@pytest.mark.timeout(600)  # a failure's shrinking replays many examples
def test_pull_consumer_matches_the_model(client, pytestconfig):
    """Random publishes, fetches and answers agree with the consumer model."""
    _run(client, pytestconfig, long=False)


@pytest.mark.model_long
@pytest.mark.timeout(3 * 3600)
def test_pull_consumer_matches_the_model_long(client, pytestconfig):
    """The long hunt of the same machine (``pytest -m model_long``)."""
    _run(client, pytestconfig, long=True)
