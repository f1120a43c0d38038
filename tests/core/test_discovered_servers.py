"""Servers a cluster announces (INFO ``connect_urls``) are reachable with the settings of
the server that announced them: its URL's credentials, and its host name for TLS; once
the client moved to one, ``server_info`` is that server's."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import LOOPBACK, NatsServer
from tests.fixtures.tls import make_tls_material


@contextmanager
def two_routed_servers(tmp_path: Any, **options: Any) -> Iterator[tuple[NatsServer, NatsServer]]:
    """Two core-NATS servers joined by a route: each announces the other to its clients."""
    first = NatsServer(
        jetstream=False, cluster_name="pair", directory=tmp_path / "a", **options
    ).start()
    try:
        routes = [f"nats-route://{LOOPBACK}:{first.cluster_port}"]
        second = NatsServer(
            jetstream=False, cluster_name="pair", routes=routes, directory=tmp_path / "b", **options
        ).start()
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _fail_over(url: str, second: NatsServer, first: NatsServer, **options: Any) -> None:
    """Connect to ``url`` (``first``), learn ``second``, stop ``first``: the client must
    reconnect to ``second`` and carry on."""
    reconnected = threading.Event()
    errors: list[BaseException] = []
    nc = js.connect(
        url,
        reconnect_time_wait=0.1,
        reconnected_cb=reconnected.set,
        error_cb=errors.append,
        **options,
    )
    try:
        wait_for(lambda: nc.discovered_servers)
        sub = nc.subscribe("failover")
        nc.flush()
        first.stop()
        wait_for(lambda: reconnected.is_set() or nc.is_closed, timeout=20)
        assert reconnected.is_set(), f"closed instead of reconnecting: {errors!r}"
        assert nc.connected_url is not None and nc.connected_url.endswith(f":{second.port}")
        nc.publish("failover", b"still here")
        assert sub.next_msg(timeout=5).data == b"still here"
    finally:
        nc.close()


def test_discovered_server_gets_the_credentials_of_the_url(tmp_path):
    """``nats://user:pass@a`` and a cluster announcing b: the reconnect to b
    authenticates with the same user (nats.go copies them too)."""
    with two_routed_servers(tmp_path, user="bob", password="s3cret") as (first, second):
        url = first.url.replace("nats://", "nats://bob:s3cret@")
        _fail_over(url, second, first)


def test_discovered_server_gets_the_token_of_the_url(tmp_path):
    """``nats://token@a``: the reconnect to a discovered server sends the token."""
    with two_routed_servers(tmp_path, token="t0ken") as (first, second):
        _fail_over(first.url.replace("nats://", "nats://t0ken@"), second, first)


@pytest.mark.tls
def test_discovered_ip_is_verified_against_the_host_name(tmp_path):
    """Connected over TLS to ``localhost`` whose certificate names no IP, the client
    verifies a server announced as ``127.0.0.1:port`` against ``localhost``."""
    material = make_tls_material(tmp_path / "tls", client=False, server_names="DNS:localhost")
    tls = {"tls_cert": material.server_cert, "tls_key": material.server_key}
    with two_routed_servers(tmp_path, **tls) as (first, second):
        context = ssl.create_default_context(cafile=str(material.ca_cert))
        url = f"tls://localhost:{first.port}"
        _fail_over(url, second, first, tls=context)


def test_server_info_is_the_new_servers_after_a_lame_duck_failover(tmp_path):
    """Moved off a server in lame duck mode, ``server_info`` no longer says ``ldm``
    (nor anything else only the old server said): it is the new server's INFO."""
    options = {"lame_duck_grace_period": 0.1, "lame_duck_duration": 30}
    with two_routed_servers(tmp_path, **options) as (first, second):
        reconnected = threading.Event()
        nc = js.connect(
            first.url, no_randomize=True, reconnect_time_wait=0.1, reconnected_cb=reconnected.set
        )
        try:
            wait_for(lambda: nc.discovered_servers)
            first.lame_duck()
            wait_for(lambda: nc.server_info.get("ldm"))
            assert reconnected.wait(20)
            assert nc.connected_url == second.url
            assert nc.server_info["server_id"] == second.info["server_id"]
            assert not nc.server_info.get("ldm")
        finally:
            nc.close()


def test_a_server_that_leaves_the_cluster_leaves_the_pool(tmp_path):
    """A third server stops: the cluster announces the other two only, and the client
    drops the one that left (nats.go does) instead of trying it on every reconnect; the
    servers it was given stay."""
    with two_routed_servers(tmp_path) as (first, second):
        routes = [f"nats-route://{LOOPBACK}:{first.cluster_port}"]
        third = NatsServer(
            jetstream=False, cluster_name="pair", routes=routes, directory=tmp_path / "c"
        ).start()
        nc = js.connect(first.url, no_randomize=True)
        try:
            wait_for(lambda: len(nc.discovered_servers) == 2)
            third.stop()
            wait_for(lambda: nc.discovered_servers == [second.url], timeout=10)
            assert nc.servers == [first.url, second.url]
        finally:
            nc.close()
            third.stop()
