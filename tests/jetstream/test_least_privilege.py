"""Users holding only the permissions their job needs (docs/security.md's table).

Each role's calls work with exactly those permissions; a call that needs one
more raises :class:`PermissionViolationError` naming the refused subject,
at once, never a ``TimeoutError`` at the end of its timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as js
from tests.fixtures.permissions import permissions_server, user_url
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

#: The timeout every call gets; a refusal must come well within FAST.
TIMEOUT = 20.0
FAST = 2.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A fresh server per test: the roles share its buckets and stream, so one test's
    keys and objects would show in another's listings."""
    with permissions_server(tmp_path) as started:
        yield started


def connect(server: NatsServer, user: str, **options: Any) -> js.Client:
    return js.connect(user_url(server, user), **options)


def refused(call: Callable[[], object], subject: str) -> js.PermissionViolationError:
    """Run ``call``: it must raise PermissionViolationError, fast, for a publish to
    ``subject`` (to a subject starting with it when it ends with a dot)."""
    started = time.monotonic()
    with pytest.raises(js.PermissionViolationError) as caught:
        call()
    assert time.monotonic() - started < FAST
    assert caught.value.operation == "publish"
    if subject.endswith("."):
        assert caught.value.subject.startswith(subject)
    else:
        assert caught.value.subject == subject
    return caught.value


# ---------------------------------------------------------------- Key-Value


def test_a_key_value_user_uses_every_call_of_its_bucket(server: NatsServer):
    """put, get, create, update, delete, purge, keys, history, watch (one key and many),
    status: each works with the Key-Value permissions alone."""
    with connect(server, "kv") as nc:
        kv = nc.jetstream(timeout=TIMEOUT).key_value("cfg")
        first = kv.put("color", b"red")
        assert kv.get("color").value == b"red"
        kv.create("size", b"L")
        assert kv.update("color", b"blue", last=first) > first
        kv.put("shape", b"round")
        kv.delete("size")
        kv.purge("shape")
        assert kv.keys() == ["color"]
        assert [e.value for e in kv.history("color")] == [b"red", b"blue"]
        with kv.watch("color") as watcher:
            assert watcher.next(timeout=TIMEOUT).value == b"blue"
        with kv.watch(["color", "size"]) as watcher:
            assert watcher.next(timeout=TIMEOUT).key == "color"
        assert kv.status().bucket == "cfg"


def test_a_key_value_user_without_stream_info_is_refused_the_handle(server: NatsServer):
    """Without $JS.API.STREAM.INFO.KV_<bucket> key_value() raises PermissionViolationError."""
    with connect(server, "kv_no_info") as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        refused(lambda: ctx.key_value("cfg"), "$JS.API.STREAM.INFO.KV_cfg")


def test_a_key_value_user_without_direct_get_is_refused_reads(server: NatsServer):
    """Without $JS.API.DIRECT.GET.KV_<bucket>.> a get raises PermissionViolationError."""
    with connect(server, "kv_no_direct") as nc:
        kv = nc.jetstream(timeout=TIMEOUT).key_value("cfg")
        kv.put("color", b"green")
        refused(lambda: kv.get("color"), "$JS.API.DIRECT.GET.KV_cfg.$KV.cfg.color")


def test_a_key_value_user_without_msg_next_is_refused_listings_and_watches(server: NatsServer):
    """Without $JS.API.CONSUMER.MSG.NEXT.KV_<bucket>.> keys, history and a watch raise
    PermissionViolationError naming the pull subject, not TimeoutError."""
    with connect(server, "kv_no_next") as nc:
        kv = nc.jetstream(timeout=TIMEOUT).key_value("cfg")
        kv.put("color", b"green")
        pull = "$JS.API.CONSUMER.MSG.NEXT.KV_cfg."
        refused(kv.keys, pull)
        refused(lambda: kv.history("color"), pull)
        with kv.watch() as watcher:
            refused(lambda: watcher.next(timeout=TIMEOUT), pull)


# ---------------------------------------------------------------- Object Store


def test_an_object_store_user_uses_every_call_of_its_bucket(server: NatsServer):
    """put (several chunks), get, get_info, list, watch, status, delete: each works with
    the Object Store permissions alone."""
    data = bytes(range(256)) * 1200  # three chunks of 128 KiB
    with connect(server, "os") as nc:
        store = nc.jetstream(timeout=TIMEOUT).object_store("files")
        assert store.put("report", data).chunks == 3
        assert store.get("report") == data
        assert store.get_info("report").size == len(data)
        assert [info.name for info in store.list()] == ["report"]
        with store.watch() as watcher:
            assert watcher.next(timeout=TIMEOUT).name == "report"
        assert store.status().bucket == "files"
        store.delete("report")
        assert store.list() == []


# ---------------------------------------------------------------- pull worker


def test_a_pull_worker_without_consumer_info_pulls_through_a_handle_without_info(
    server: NatsServer,
):
    """A worker allowed only MSG.NEXT and ACK: consumer() is refused (it asks for the
    info); consumer_no_info() gives a handle whose fetch, next, messages and consume work."""
    with connect(server, "admin") as nc:
        for _ in range(2):
            nc.jetstream().publish("orders.new", b"for the worker")
    with connect(server, "worker") as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        refused(lambda: ctx.consumer("ORDERS", "work"), "$JS.API.CONSUMER.INFO.ORDERS.work")
        work = ctx.consumer_no_info("ORDERS", "work")
        assert work.cached_info is None
        got = work.fetch(1, timeout=TIMEOUT)
        got.append(work.next(timeout=TIMEOUT))
        with ctx.stream_no_info("ORDERS").consumer_no_info("feed").messages() as messages:
            got.append(messages.next(timeout=TIMEOUT))
        handled: list[js.Msg] = []
        delivered = threading.Event()
        handler = ctx.consumer_no_info("ORDERS", "handler")
        with handler.consume(lambda msg: (handled.append(msg), delivered.set())):
            assert delivered.wait(TIMEOUT)
        for msg in [*got, handled[0]]:
            assert msg.subject.startswith("orders.")
            msg.ack_sync()


def test_a_refused_pull_fails_every_way_of_pulling_at_once(server: NatsServer):
    """A consumer the worker may not pull from: fetch, next and messages raise
    PermissionViolationError at once; consume hands it to its error handler and stops."""
    with connect(server, "worker") as nc:
        consumer = nc.jetstream(timeout=TIMEOUT).stream_no_info("ORDERS").consumer_no_info("other")
        pull = "$JS.API.CONSUMER.MSG.NEXT.ORDERS.other"
        refused(lambda: consumer.fetch(1, timeout=TIMEOUT), pull)
        refused(lambda: consumer.next(timeout=TIMEOUT), pull)
        with consumer.messages() as messages:
            refused(lambda: messages.next(timeout=TIMEOUT), pull)
        errors: list[BaseException] = []
        stopped = threading.Event()

        def handler(exc: BaseException) -> None:
            errors.append(exc)
            stopped.set()

        with consumer.consume(lambda msg: None, error_handler=handler) as consuming:
            assert stopped.wait(FAST)
            wait_for(lambda: consuming.closed, timeout=FAST)
        assert [type(e) for e in errors] == [js.PermissionViolationError]
        assert errors[0].subject == pull  # type: ignore[attr-defined]


def test_a_pull_whose_inbox_is_refused_raises_instead_of_finding_nothing(server: NatsServer):
    """A user who may not subscribe to the default inbox (only to _INBOX_app2.>): fetch
    and messages raise PermissionViolationError for the inbox's subscription at once,
    not an empty list or a TimeoutError."""
    with connect(server, "app2") as nc:
        _pulls_raise_the_inbox_refusal(nc, within=FAST)


def test_a_pull_whose_inbox_refusal_is_read_before_subscribe_returns_raises(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
):
    """The server's -ERR for a pull's inbox SUB may be read (on the reader thread) before
    subscribe() has returned to the pull: fetch and messages raise it all the same.

    subscribe() is made to return only once error_cb got that refusal, the order a busy
    machine may give; the pull used to miss it and end empty (or time out) at its timeout."""
    refused: list[BaseException] = []
    with connect(server, "app2", error_cb=refused.append) as nc:
        subscribe = nc.subscribe

        def subscribe_then_refused(subject: str, *args: Any, **kwargs: Any) -> js.Subscription:
            sub = subscribe(subject, *args, **kwargs)
            wait_for(
                lambda: any(getattr(e, "subject", None) == subject for e in refused),
                timeout=FAST,
                message=f"the SUB of {subject} was not refused",
            )
            return sub

        monkeypatch.setattr(nc, "subscribe", subscribe_then_refused)
        _pulls_raise_the_inbox_refusal(nc, within=2 * FAST)


def _pulls_raise_the_inbox_refusal(nc: js.Client, within: float) -> None:
    """fetch() and messages().next() raise the refusal of their inbox's SUB ``within``."""
    consumer = nc.jetstream(timeout=TIMEOUT).consumer_no_info("ORDERS", "work")
    for pull in (
        lambda: consumer.fetch(1, timeout=TIMEOUT),
        lambda: consumer.messages().next(timeout=TIMEOUT),
    ):
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            pull()
        assert time.monotonic() - started < within
        assert caught.value.operation == "subscription"
        assert caught.value.subject.startswith("_INBOX.")


# ---------------------------------------------------------------- publish-only service


def test_a_publish_only_service_publishes_and_is_refused_elsewhere_at_once(server: NatsServer):
    """Allowed only orders.> and its inbox: publish and publish_async are acknowledged; a
    publish elsewhere raises PermissionViolationError at once, and so does its future."""
    with connect(server, "publisher") as nc:
        ctx = nc.jetstream(timeout=TIMEOUT)
        assert ctx.publish("orders.new", b"1").stream == "ORDERS"
        future = ctx.publish_async("orders.new", b"2")
        assert future.result(TIMEOUT).stream == "ORDERS"
        refused(lambda: ctx.publish("audit.new", b"3"), "audit.new")
        allowed = ctx.publish_async("orders.new", b"4")
        denied = ctx.publish_async("audit.new", b"5")
        refused(lambda: denied.result(TIMEOUT), "audit.new")
        assert allowed.result(TIMEOUT).stream == "ORDERS"
        ctx.publish_async_completed(TIMEOUT)


def test_publish_async_whose_ack_inbox_is_refused_fails_at_once(server: NatsServer):
    """A user who may not subscribe to the default inbox: the pending future fails with
    PermissionViolationError for the ack inbox as soon as its SUB is refused, and a
    later publish_async raises it before sending.

    The first call subscribes the ack inbox; the server's refusal may come back before
    that call registers its future, and then the call itself raises: both are at once."""
    with connect(server, "app2") as nc:
        ctx = nc.jetstream(timeout=TIMEOUT, ack_timeout=TIMEOUT)
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            ctx.publish_async("orders.new", b"1").result(TIMEOUT)
        assert time.monotonic() - started < FAST
        assert caught.value.operation == "subscription"
        assert caught.value.subject.startswith("_INBOX.")
        with pytest.raises(js.PermissionViolationError):
            ctx.publish_async("orders.new", b"2")
        assert ctx.publish_async_pending() == 0


def test_publish_async_whose_ack_inbox_is_refused_again_after_a_reconnect_raises(
    server: NatsServer,
):
    """A reconnect subscribes the ack inbox again; when the server refuses it again,
    publish_async raises at once, also when that refusal is read before the events
    thread has handled the reconnect.

    reconnected_cb (which runs before the library's own status listeners, on the same
    thread) returns only once the second refusal was read, the order a busy machine
    may give; the reconnect then cleared the fresh refusal, and the next future
    failed only at its ack timeout."""
    again = threading.Event()
    refusals: list[BaseException] = []

    def on_refusal(error: BaseException) -> None:
        refusals.append(error)
        if sum(getattr(e, "operation", "") == "subscription" for e in refusals) == 2:
            again.set()

    def on_reconnected() -> None:
        assert again.wait(TIMEOUT)

    errors: list[BaseException] = []
    options = {"reconnected_cb": on_reconnected, "error_cb": errors.append}
    with connect(server, "app2", reconnect_time_wait=0.1, **options) as nc:
        nc.add_refusal_listener(on_refusal)
        ctx = nc.jetstream(timeout=TIMEOUT, ack_timeout=TIMEOUT)
        with pytest.raises(js.PermissionViolationError):
            ctx.publish_async("orders.new", b"1").result(TIMEOUT)
        server.restart()
        # error_cb hears the second refusal after the events thread handled the reconnect.
        wait_for(lambda: sum(getattr(e, "operation", "") == "subscription" for e in errors) == 2)
        started = time.monotonic()
        with pytest.raises(js.PermissionViolationError) as caught:
            ctx.publish_async("orders.new", b"2").result(TIMEOUT)
        assert time.monotonic() - started < FAST
        assert caught.value.operation == "subscription"


# ---------------------------------------------------------------- a custom inbox prefix


def test_every_call_replies_on_the_custom_inbox_prefix(server: NatsServer):
    """A user who may subscribe only to _INBOX_app1.>, connected with that inbox_prefix:
    requests, JetStream calls, async publishes, KV watches, Object Store reads, pulls,
    ordered consumers and push subscriptions all work; the server refuses nothing."""
    errors: list[BaseException] = []
    with connect(server, "app1", inbox_prefix="_INBOX_app1", error_cb=errors.append) as nc:
        nc.subscribe("svc.ping", cb=lambda msg: msg.respond(b"pong"))
        assert nc.request("svc.ping", b"", timeout=TIMEOUT).data == b"pong"
        ctx = nc.jetstream(timeout=TIMEOUT)
        ctx.publish("orders.app1", b"1")
        ctx.publish_async("orders.app1", b"2").result(TIMEOUT)
        kv = ctx.key_value("cfg")
        kv.put("app1", b"on")
        with kv.watch("app1") as watcher:
            assert watcher.next(timeout=TIMEOUT).value == b"on"
        store = ctx.object_store("files")
        store.put("app1", b"x" * 300_000)
        assert len(store.get("app1")) == 300_000
        store.delete("app1")
        consumer = ctx.create_consumer("ORDERS", ack_policy="explicit")
        with consumer:
            consumer.fetch(1, timeout=TIMEOUT)[0].ack_sync()
            with consumer.messages() as messages:
                messages.next(timeout=TIMEOUT).ack_sync()
        with ctx.ordered_consumer("ORDERS") as ordered:
            assert ordered.next(timeout=TIMEOUT).subject.startswith("orders.")
        push = ctx.subscribe("orders.app1")
        assert push.next_msg(timeout=TIMEOUT).subject == "orders.app1"
        push.unsubscribe()
        nc.flush()
    assert errors == []
    assert "user:app1" not in "".join(
        line for line in server.log_text().splitlines() if "Violation" in line
    )


# ---------------------------------------------------------------- an imported JetStream API

_IMPORTED_API = """
accounts {
  JS: {
    jetstream: enabled
    users: [ {user: admin, password: pw} ]
    exports: [
      {service: "$JS.API.>", response_type: stream}
      {service: "$KV.>"}
      {service: "$JS.ACK.>"}
    ]
  }
  APP: {
    users: [ {user: app, password: pw} ]
    imports: [
      {service: {account: JS, subject: "$JS.API.>"}, to: "js.api.>"}
      {service: {account: JS, subject: "$KV.>"}, to: "js.api.$KV.>"}
      {service: {account: JS, subject: "$JS.ACK.>"}}
    ]
  }
}
"""


def test_an_account_importing_the_api_reads_and_writes_a_bucket_and_pulls(tmp_path: Path):
    """An account importing JetStream's API under js.api.> (and $KV.> as js.api.$KV.>,
    as nats.go expects): KV writes, reads and listings, and pulls with acks, all work."""
    with NatsServer(directory=tmp_path / "srv", extra_config=_IMPORTED_API) as srv:
        with js.connect(user_url(srv, "admin")) as nc:
            ctx = nc.jetstream()
            ctx.create_key_value(bucket="cfg")
            ctx.create_stream(name="ORDERS", subjects=["orders.>"])
            ctx.create_consumer("ORDERS", durable_name="work", ack_policy="explicit")
            ctx.publish("orders.new", b"1")
        with connect(srv, "app") as nc:
            ctx = nc.jetstream(prefix="js.api", timeout=TIMEOUT)
            kv = ctx.key_value("cfg")
            kv.put("color", b"red")
            assert kv.get("color").value == b"red"
            assert kv.keys() == ["color"]
            [msg] = ctx.consumer("ORDERS", "work").fetch(1, timeout=TIMEOUT)
            msg.ack_sync()
