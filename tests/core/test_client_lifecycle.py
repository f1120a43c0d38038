"""Threads, close, drain, reconnect, fork, auth and TLS against real servers."""

from __future__ import annotations

import multiprocessing
import ssl
import threading

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer
from tests.fixtures.sockets import free_port


def _client_threads(nc) -> list[threading.Thread]:
    tag = f"jetstream_sync-{nc._id}-"
    sids = {f"jetstream_sync-sub-{sid}" for sid in nc._connection._subs.sids()}
    return [t for t in threading.enumerate() if t.name.startswith(tag) or t.name in sids]


def test_eight_threads_share_one_client(shared_server):
    """8 threads publishing and requesting through one client lose nothing."""
    with js.connect(shared_server.url) as nc:
        sub = nc.subscribe("shared.>")
        nc.subscribe("shared-svc", cb=lambda m: m.respond(m.data))
        errors = []

        def worker(n):
            try:
                for i in range(250):
                    nc.publish(f"shared.{n}", b"%d" % i)
                    if i % 25 == 0:
                        assert nc.request("shared-svc", b"%d" % i, timeout=5).data == b"%d" % i
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        nc.flush()
        got = {}
        for _ in range(8 * 250):
            msg = sub.next_msg(timeout=5)
            got.setdefault(msg.subject, []).append(int(msg.data))
        assert all(v == list(range(250)) for v in got.values()) and len(got) == 8


def test_close_joins_every_thread(shared_server):
    """close() stops and joins the reader, writer, pinger, events and callback threads."""
    nc = js.connect(shared_server.url)
    nc.subscribe("t.cb", cb=lambda m: None)
    nc.subscribe("t.cb2", cb=lambda m: None)
    threads = _client_threads(nc)
    assert len(threads) >= 6
    nc.close()
    assert not [t for t in threads if t.is_alive()]


def test_close_from_inside_a_callback(shared_server):
    """A callback may close its own client without deadlocking."""
    nc = js.connect(shared_server.url)
    done = threading.Event()

    def on_msg(msg):
        nc.close()
        done.set()

    nc.subscribe("close.me", cb=on_msg)
    nc.publish("close.me", b"x")
    assert done.wait(5)
    assert nc.is_closed


def test_close_wakes_a_blocked_next_msg(shared_server):
    """A thread blocked in next_msg gets ConnectionClosedError when the client closes."""
    nc = js.connect(shared_server.url)
    sub = nc.subscribe("blocked")
    errors = []

    def wait():
        try:
            sub.next_msg(timeout=30)
        except js.ConnectionClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    nc.close()
    t.join(5)
    assert errors and not t.is_alive()


def test_client_drain_handles_pending_then_closes(shared_server):
    """drain() lets callbacks finish what was sent, then closes and calls closed_cb."""
    closed = threading.Event()
    nc = js.connect(shared_server.url, closed_cb=closed.set)
    got = []
    nc.subscribe("drain.all", cb=lambda m: got.append(m))
    for _ in range(300):
        nc.publish("drain.all", b"x")
    nc.drain(timeout=10)
    assert len(got) == 300
    assert nc.is_closed and closed.wait(5)


def test_reconnect_after_server_restart_keeps_subscriptions(restartable_server):
    """After a server restart the client reconnects and its subscriptions still work."""
    events = []
    reconnected = threading.Event()
    nc = js.connect(
        restartable_server.url,
        reconnect_time_wait=0.1,
        disconnected_cb=lambda: events.append("disconnected"),
        reconnected_cb=lambda: (events.append("reconnected"), reconnected.set()),
    )
    try:
        sub = nc.subscribe("survive")
        nc.subscribe("survive.svc", cb=lambda m: m.respond(b"pong"))
        nc.request("survive.svc", timeout=2)
        restartable_server.restart()
        assert reconnected.wait(15)
        assert events[:2] == ["disconnected", "reconnected"]
        assert nc.stats.reconnects == 1 and nc.is_connected
        nc.publish("survive", b"after")
        assert sub.next_msg(timeout=5).data == b"after"
        assert nc.request("survive.svc", timeout=5).data == b"pong"
    finally:
        nc.close()


def test_publishes_while_disconnected_are_sent_after_reconnect(restartable_server):
    """Messages published during the outage are buffered and delivered after reconnecting."""
    reconnected = threading.Event()
    disconnected = threading.Event()
    nc = js.connect(
        restartable_server.url,
        reconnect_time_wait=0.1,
        disconnected_cb=disconnected.set,
        reconnected_cb=reconnected.set,
    )
    try:
        sub = nc.subscribe("buffered")
        nc.flush()
        restartable_server.stop()
        assert disconnected.wait(10)
        for i in range(10):
            nc.publish("buffered", str(i))
        restartable_server.start()
        assert reconnected.wait(15)
        assert [sub.next_msg(timeout=5).data for _ in range(10)] == [b"%d" % i for i in range(10)]
    finally:
        nc.close()


def test_reconnect_buffer_overflow_raises(restartable_server):
    """Past reconnect_buf_size a publish raises instead of dropping the message; so do a
    request, a JetStream publish and an async publish (which then leaves no future)."""
    disconnected = threading.Event()
    nc = js.connect(
        restartable_server.url,
        reconnect_buf_size=1024,
        reconnect_time_wait=5,
        disconnected_cb=disconnected.set,
    )
    try:
        ctx = nc.jetstream()
        restartable_server.stop()
        assert disconnected.wait(10)
        with pytest.raises(js.ReconnectBufferFullError, match="reconnect buffer"):
            for _ in range(100):
                nc.publish("overflow", b"x" * 100)
        big = b"x" * 2048
        with pytest.raises(js.ReconnectBufferFullError):
            nc.request("overflow.req", big, timeout=5)
        with pytest.raises(js.ReconnectBufferFullError):
            ctx.publish("overflow.js", big, timeout=5)
        with pytest.raises(js.ReconnectBufferFullError):
            ctx.publish_async("overflow.js", big, timeout=5)
        assert ctx.publish_async_pending() == 0
    finally:
        nc.close()


def test_no_reconnect_closes_the_client(restartable_server):
    """With allow_reconnect=False a lost connection closes the client and calls closed_cb."""
    closed = threading.Event()
    nc = js.connect(restartable_server.url, allow_reconnect=False, closed_cb=closed.set)
    restartable_server.stop()
    assert closed.wait(10)
    assert nc.is_closed


def test_giving_up_on_reconnecting_names_the_last_failure(restartable_server):
    """Once every reconnect attempt failed, error_cb's NoServersError says why the last
    one failed and holds it as its ``__cause__`` (here: nobody listens any more)."""
    errors: list[BaseException] = []
    closed = threading.Event()
    nc = js.connect(
        restartable_server.url,
        max_reconnect_attempts=2,
        reconnect_time_wait=0.05,
        error_cb=errors.append,
        closed_cb=closed.set,
    )
    restartable_server.stop()
    assert closed.wait(15)
    (error,) = [e for e in errors if isinstance(e, js.NoServersError)]
    assert isinstance(error.__cause__, ConnectionRefusedError)
    assert "the last attempt failed: ConnectionRefusedError" in str(error)
    assert nc.is_closed


def _child_uses_inherited_client(nc, queue):
    try:
        nc.publish("fork.x", b"from child")
        queue.put("no error")
    except js.ForkedClientError as exc:
        queue.put(f"forked: {exc}")
    nc.close()  # must not shut down the parent's socket
    queue.put("closed")


def test_fork_child_gets_a_clear_error_and_parent_keeps_working(shared_server):
    """A forked child cannot use the parent's client; the parent's connection is untouched."""
    nc = js.connect(shared_server.url)
    try:
        sub = nc.subscribe("fork.after")
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child_uses_inherited_client, args=(nc, queue))
        child.start()
        child.join(20)
        assert child.exitcode == 0
        assert queue.get(timeout=5).startswith("forked:")
        assert queue.get(timeout=5) == "closed"
        nc.publish("fork.after", b"parent")
        assert sub.next_msg(timeout=5).data == b"parent"
    finally:
        nc.close()


def test_user_password_auth(auth_server):
    """Right credentials connect; wrong ones raise AuthorizationError."""
    with js.connect(auth_server.auth_url) as nc:
        nc.flush()
    with pytest.raises(js.AuthorizationError):
        js.connect(auth_server.url, user="nobody", password="wrong")


def test_a_server_refusing_the_credentials_passes_the_connect_to_the_next(
    auth_server, shared_server
):
    """With servers=[A, B], A refusing the credentials and B taking them, connect()
    reaches B, as nats.go's first connect walks the whole pool."""
    servers = [auth_server.url, shared_server.url]
    with js.connect(servers, no_randomize=True) as nc:
        assert nc.connected_url.endswith(f":{shared_server.port}")


def test_a_pool_that_refuses_or_cannot_be_reached_raises_the_refusal(auth_server, token_server):
    """When no server takes the client, a refusal of its credentials is what connect()
    raises (not NoServersError), whatever the order of the servers."""
    dead = f"nats://127.0.0.1:{free_port()}"
    for servers in ([auth_server.url, token_server.url], [auth_server.url, dead],
                    [dead, token_server.url]):  # fmt: skip
        with pytest.raises(js.AuthorizationError):
            js.connect(servers, no_randomize=True, connect_timeout=5)


def test_token_auth(token_server):
    """A token in the URL or as an option authenticates."""
    with js.connect(token_server.auth_url) as nc:
        nc.flush()
    with pytest.raises(js.AuthorizationError):
        js.connect(token_server.url, token="wrong")


def test_user_password_and_token_options_are_all_sent(token_server, auth_server):
    """With user, password and token all given, CONNECT carries all three, as nats.go
    sends them: a token server and a user/password server both take the client."""
    for server in (token_server, auth_server):
        with js.connect(server.url, user="alice", password="s3cret", token="t0ken") as nc:
            nc.flush()


def test_url_credentials_win_over_the_options(token_server, auth_server):
    """Credentials in a URL replace those of the options, whatever their kind: a URL
    token is sent instead of a user/password option, and the reverse."""
    with js.connect(token_server.auth_url, user="alice", password="s3cret") as nc:
        nc.flush()
    with js.connect(auth_server.auth_url, token="t0ken") as nc:
        nc.flush()


@pytest.mark.tls
def test_tls_connection(tls_server):
    """A client trusting the test CA talks TLS to a TLS-only server."""
    server, ca = tls_server
    context = ssl.create_default_context(cafile=str(ca))
    with js.connect(server.url, tls=context) as nc:
        sub = nc.subscribe("secure")
        nc.publish("secure", b"x")
        assert sub.next_msg(timeout=5).data == b"x"
    with pytest.raises((js.NoServersError, ssl.SSLError)):
        js.connect(server.url, tls=True, connect_timeout=2)


@pytest.mark.cluster
def test_cluster_failover_uses_discovered_servers(cluster):
    """Connected to one node, the client learns the others and fails over when it dies."""
    first = cluster.servers[0]
    reconnected = threading.Event()
    nc = js.connect(first.url, reconnect_time_wait=0.1, reconnected_cb=reconnected.set)
    try:
        assert len(nc.servers) == 3 and len(nc.discovered_servers) == 2
        sub = nc.subscribe("failover")
        nc.flush()
        cluster.kill(0)
        assert reconnected.wait(30), "no reconnect to a discovered node within 30 s"
        assert nc.connected_url != first.url
        nc.publish("failover", b"still here")
        assert sub.next_msg(timeout=5).data == b"still here"
    finally:
        nc.close()
        cluster.restart(0)


def test_stale_connection_is_detected_by_keepalive_pings(restartable_server, caplog):
    """A server that stops answering PINGs is declared stale; the log and a request lost with
    the link say the client found it stale and closed it; the client reconnects after."""
    caplog.set_level("INFO", logger="jetstream_sync")
    errors: list[BaseException] = []
    lost: list[BaseException] = []
    disconnected, reconnected = threading.Event(), threading.Event()
    nc = js.connect(
        restartable_server.url,
        ping_interval=0.2,
        max_outstanding_pings=2,
        connect_timeout=0.5,
        reconnect_time_wait=0.1,
        error_cb=errors.append,
        disconnected_cb=disconnected.set,
        reconnected_cb=reconnected.set,
    )
    try:
        # freeze() returns once every server thread is stopped: a raw SIGSTOP leaves a thread
        # running long enough on a busy machine to answer the request (503, no responders).
        with restartable_server.freeze():  # PINGs go unanswered
            worker = threading.Thread(target=lambda: _record(lost, nc.request, "frozen", b"", 30))
            worker.start()
            assert disconnected.wait(10)
            worker.join()
        stale = [e for e in errors if isinstance(e, js.StaleConnectionError)]
        assert stale and "the client closed the connection" in str(stale[0])
        assert len(lost) == 1 and isinstance(lost[0], js.ConnectionLostError), lost
        assert "stale" in str(lost[0]) and "closed by the server" not in str(lost[0])
        logged = [r.getMessage() for r in caplog.records if "disconnected from" in r.getMessage()]
        assert logged and "stale" in logged[0] and "closed by the server" not in logged[0]
        assert reconnected.wait(15)
        nc.flush()
    finally:
        nc.close()


def _record(into: list[BaseException], call, *args) -> None:
    """Run ``call(*args)``; keep what it raised."""
    try:
        call(*args)
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        into.append(exc)


def test_lame_duck_mode_is_reported(restartable_server):
    """A server entering lame duck mode calls lame_duck_cb and status listeners."""
    lame = threading.Event()
    statuses = []
    nc = js.connect(restartable_server.url, lame_duck_cb=lame.set)
    nc.add_status_listener(statuses.append)
    try:
        restartable_server.lame_duck()
        assert lame.wait(10)
        wait_for(lambda: "lame_duck" in statuses)
    finally:
        nc.close()


@pytest.mark.tls
def test_tls_handshake_first(tmp_path, tls_material, monkeypatch):
    """With tls_handshake_first, TLS starts before INFO (server handshake_first). The option
    alone, with a nats:// URL and no tls=, starts TLS with a default context (as nats.go
    does), instead of waiting for an INFO that never comes."""
    server = NatsServer(
        directory=tmp_path / "hs-first",
        tls_cert=tls_material.server_cert,
        tls_key=tls_material.server_key,
        tls_handshake_first=True,
    ).start()
    try:
        context = ssl.create_default_context(cafile=str(tls_material.ca_cert))
        with js.connect(server.url, tls=context, tls_handshake_first=True) as nc:
            nc.flush()
            assert nc.server_info.get("tls_required")
        with pytest.raises(js.NoServersError):
            js.connect(server.url, tls=context, connect_timeout=1)
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_material.ca_cert))  # the default trust
        with js.connect(server.url, tls_handshake_first=True, connect_timeout=2) as nc:
            nc.flush()
            assert nc.server_info.get("tls_required")
    finally:
        server.stop()
