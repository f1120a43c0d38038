"""Mutual TLS and TLS mismatches: a client certificate authenticates; every mismatch fails fast.

Each mismatch must end in a typed error (``NoServersError`` whose cause says
why) well within ``connect_timeout`` plus the handshake, never a hang.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync
from tests.fixtures.server import NatsServer
from tests.fixtures.tls import TLSMaterial, make_tls_material

pytestmark = pytest.mark.tls

CONNECT_TIMEOUT = 2.0


def client_context(material: TLSMaterial, *, certificate: bool = True) -> ssl.SSLContext:
    """A context trusting ``material``'s CA, presenting its client certificate if asked."""
    context = ssl.create_default_context(cafile=str(material.ca_cert))
    if certificate:
        assert material.client_cert is not None and material.client_key is not None
        context.load_cert_chain(str(material.client_cert), str(material.client_key))
    return context


@pytest.fixture
def mtls_server(tmp_path: Path, tls_material: TLSMaterial) -> Iterator[NatsServer]:
    """A TLS server that requires and verifies client certificates signed by the test CA."""
    server = NatsServer(
        directory=tmp_path / "mtls",
        jetstream=False,
        tls_cert=tls_material.server_cert,
        tls_key=tls_material.server_key,
        tls_ca=tls_material.ca_cert,
        tls_verify=True,
    ).start()
    yield server
    server.stop()


def refused(url: str, **options: object) -> jetstream_sync.NoServersError:
    """Connect, expecting NoServersError well within the connect timeout; return it."""
    start = time.monotonic()
    with pytest.raises(jetstream_sync.NoServersError) as caught:
        jetstream_sync.connect(url, connect_timeout=CONNECT_TIMEOUT, **options)
    assert time.monotonic() - start < CONNECT_TIMEOUT + 2.0  # bounded: never a hang
    return caught.value


def test_client_certificate_authenticates_and_survives_a_restart(mtls_server, tls_material):
    """With the CA's client certificate the client talks, and reconnects with it."""
    reconnected = threading.Event()
    with jetstream_sync.connect(
        mtls_server.url,
        tls=client_context(tls_material),
        reconnect_time_wait=0.1,
        reconnected_cb=reconnected.set,
    ) as nc:
        sub = nc.subscribe("mtls")
        nc.publish("mtls", b"signed")
        assert sub.next_msg(timeout=5).data == b"signed"
        (conn,) = mtls_server.monitor("connz", auth=True)["connections"]
        assert conn["tls_peer_certs"][0]["subject"] == "CN=jetstream_sync test client"
        mtls_server.restart()
        assert reconnected.wait(15)
        nc.publish("mtls", b"again")
        assert sub.next_msg(timeout=5).data == b"again"


def test_missing_client_certificate_is_refused(mtls_server, tls_material):
    """Without a client certificate the TLS handshake fails: a typed error at once."""
    error = refused(mtls_server.url, tls=client_context(tls_material, certificate=False))
    assert isinstance(error.__cause__, ssl.SSLError)
    assert "certificate" in str(error).lower()


def test_client_certificate_of_another_ca_is_refused(mtls_server, tls_material, tmp_path):
    """A client certificate the server's CA did not sign is refused."""
    stranger = make_tls_material(tmp_path / "other-ca")
    context = ssl.create_default_context(cafile=str(tls_material.ca_cert))
    assert stranger.client_cert is not None and stranger.client_key is not None
    context.load_cert_chain(str(stranger.client_cert), str(stranger.client_key))
    error = refused(mtls_server.url, tls=context)
    assert isinstance(error.__cause__, (ssl.SSLError, ConnectionError, OSError))


def test_tls_server_and_a_client_without_tls_settings(tls_server):
    """A server requiring TLS and a client with no CA for it: certificate verification fails."""
    server, _ = tls_server
    error = refused(server.url)
    assert isinstance(error.__cause__, ssl.SSLCertVerificationError)


def test_client_requiring_tls_and_a_plain_server(nats_server, tls_material):
    """A client requiring TLS and a server without it: a clear error, before any TLS bytes."""
    error = refused(nats_server.url, tls=client_context(tls_material, certificate=False))
    assert "does not offer TLS" in str(error)
    error = refused(nats_server.url.replace("nats://", "tls://"))
    assert "does not offer TLS" in str(error)


def test_handshake_first_server_and_a_client_waiting_for_info(tmp_path, tls_material):
    """A handshake_first server stays silent: the timeout says why, at connect_timeout."""
    server = NatsServer(
        directory=tmp_path / "hs-first",
        jetstream=False,
        tls_cert=tls_material.server_cert,
        tls_key=tls_material.server_key,
        tls_handshake_first=True,
    ).start()
    try:
        error = refused(server.url, tls=client_context(tls_material, certificate=False))
        assert isinstance(error.__cause__, TimeoutError)
        assert "tls_handshake_first=True" in str(error)
    finally:
        server.stop()


def test_a_frozen_server_is_not_blamed_on_tls_handshake_first(nats_server):
    """A server that accepts but says nothing (frozen, overloaded) times out with a
    message that names that case first: the handshake_first hint is one cause of several."""
    with nats_server.freeze():
        error = refused(nats_server.url)
    assert isinstance(error.__cause__, TimeoutError)
    assert "the server accepted the connection but sent nothing" in str(error)
    assert "tls_handshake_first=True" in str(error)
