"""Secrets never leak, and refused credentials fail fast without a reconnect storm.

Passwords, tokens, NKey seeds and JWTs must not appear in any ``repr()``,
exception text (the whole chain of causes), log record (the root logger at
DEBUG, every record) or ``server_info``-derived text, whether the credentials
were right or wrong. Attempts are counted by the server itself (``connz``
closed connections with reason "Authentication Failure").
"""

from __future__ import annotations

import logging
import secrets
import threading
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync._nkeys import KeyPair
from jetstream_sync._timefmt import parse_rfc3339
from tests.fixtures.nkeys_auth import Operator, nkey_server_for, user_jwt
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

# ---------------------------------------------------------------- capture


class Capture(logging.Handler):
    """Every log record of every logger, rendered with its traceback."""

    def __init__(self) -> None:
        """Start empty, at DEBUG."""
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the message, its raw arguments and its formatted exception."""
        text = f"{record.name} {record.getMessage()} {record.args!r}"
        if record.exc_info:
            text += "".join(traceback.format_exception(*record.exc_info))
        self.texts.append(text)


@pytest.fixture
def log_capture() -> Iterator[Capture]:
    """The root logger at DEBUG with a handler that keeps everything."""
    root = logging.getLogger()
    handler, level = Capture(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def error_text(exc: BaseException) -> str:
    """str, repr and the formatted traceback of an exception and its causes."""
    return f"{exc} {exc!r} " + "".join(traceback.format_exception(exc))


def assert_no_secret(texts: list[str], secret_values: list[str]) -> None:
    """No text contains a secret (nor a 12-character piece of one: a mistyped seed)."""
    for secret in secret_values:
        pieces = {secret} | {secret[i : i + 12] for i in range(0, max(len(secret) - 12, 0), 6)}
        for text in texts:
            for piece in pieces:
                assert piece not in text, f"secret piece {piece!r} leaked in: {text[:500]}"


def auth_failures(server: NatsServer) -> list[datetime]:
    """Start times of the connections the server closed for failed authentication."""
    closed = server.monitor("connz", state="closed", limit=1000)["connections"] or []
    return sorted(
        parse_rfc3339(c["start"])  # the server trims the fraction's trailing zeros
        for c in closed
        if c.get("reason") == "Authentication Failure"
    )


# ---------------------------------------------------------------- credential kinds


class Kind:
    """A way to authenticate: a server requiring it, right and wrong options, the secrets."""

    def __init__(
        self,
        server: Callable[[Path], NatsServer],
        good: dict[str, Any],
        bad: dict[str, Any],
        secret_values: list[str],
        url_userinfo: str | None = None,
    ) -> None:
        """Describe the kind; ``url_userinfo`` puts the good credentials in the URL too."""
        self.server, self.good, self.bad = server, good, bad
        self.secret_values, self.url_userinfo = secret_values, url_userinfo


def _password(tmp: Path) -> Kind:
    good, bad = "pw-" + secrets.token_hex(12), "pw-" + secrets.token_hex(12)
    return Kind(
        lambda d: NatsServer(directory=d, jetstream=False, user="svc", password=good),
        {"user": "svc", "password": good},
        {"user": "svc", "password": bad},
        [good, bad],
        url_userinfo=f"svc:{good}",
    )


def _token(tmp: Path) -> Kind:
    good, bad = "tok-" + secrets.token_hex(12), "tok-" + secrets.token_hex(12)
    return Kind(
        lambda d: NatsServer(directory=d, jetstream=False, token=good),
        {"token": good},
        {"token": bad},
        [good, bad],
        url_userinfo=good,
    )


def _nkey(tmp: Path) -> Kind:
    user, stranger = KeyPair.create(), KeyPair.create()
    seed_file = tmp / "user.nk"
    seed_file.write_text(user.seed)
    return Kind(
        lambda d: nkey_server_for((user,)),
        {"nkeys_seed": seed_file},
        {"nkeys_seed": stranger.seed},
        [user.seed, stranger.seed],
    )


def _creds(tmp: Path) -> Kind:
    operator, user, stranger = Operator(), KeyPair.create(), KeyPair.create()
    jwt = user_jwt(operator.account, user)
    good = operator.creds(tmp / "user.creds", user, jwt)
    bad = operator.creds(tmp / "bad.creds", stranger, jwt)  # the JWT with a foreign seed
    return Kind(
        lambda d: NatsServer(directory=d, jetstream=False, extra_config=operator.config()),
        {"user_credentials": good},
        {"user_credentials": bad},
        [jwt, jwt.rsplit(".", 1)[1], user.seed, stranger.seed],
    )


KINDS = {"password": _password, "token": _token, "nkey": _nkey, "creds": _creds}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Kind, NatsServer]]:
    """Each credential kind with a running server requiring it."""
    spec = KINDS[request.param](tmp_path)
    server = spec.server(tmp_path / "server").start()
    try:
        yield spec, server
    finally:
        server.stop()


# ---------------------------------------------------------------- tests


def test_no_secret_in_reprs_errors_logs_or_server_info(kind, log_capture) -> None:
    """A run with wrong then right credentials (and a reconnect) shows no secret anywhere."""
    spec, server = kind
    texts: list[str] = []
    errors: list[BaseException] = []

    with pytest.raises(jetstream_sync.AuthorizationError) as refused:
        jetstream_sync.connect(server.url, allow_reconnect=False, **spec.bad)
    texts.append(error_text(refused.value))

    reconnected = threading.Event()
    urls = [server.url]
    if spec.url_userinfo is not None:
        urls = [f"nats://{spec.url_userinfo}@127.0.0.1:{server.port}"]
    options = {} if spec.url_userinfo is not None else spec.good
    with jetstream_sync.connect(
        urls,
        name="secrets-test",
        reconnect_time_wait=0.1,
        error_cb=errors.append,
        reconnected_cb=reconnected.set,
        **options,
    ) as nc:
        sub = nc.subscribe("secrets.check")
        nc.publish("secrets.check", b"x")
        assert sub.next_msg(timeout=5).data == b"x"
        server.restart()
        assert reconnected.wait(15)
        nc.flush(timeout=5)
        with pytest.raises(jetstream_sync.NoRespondersError) as no_responders:
            nc.request("secrets.nobody", b"", timeout=2)
        texts += [
            repr(nc),
            str(nc),
            repr(nc.server_info),
            str(nc.servers),
            str(nc.discovered_servers),
            str(nc.connected_url),
            repr(nc.stats),
            repr(sub),
            repr(nc.jetstream()),
            repr(nc._connection.options),
            repr(nc._connection._pool.addresses()),
            error_text(no_responders.value),
        ]
    texts += [repr(nc), *(error_text(e) for e in errors)]
    texts += log_capture.texts
    assert_no_secret(texts, spec.secret_values)


def test_wrong_credentials_fail_fast_with_one_attempt_per_server(kind) -> None:
    """Wrong credentials raise AuthorizationError after one attempt on each server of the
    pool (a refusal passes the connect on to the next, as in nats.go), never more."""
    spec, server = kind
    pool = [server.url, f"nats://localhost:{server.port}"]  # the same server twice
    with pytest.raises(jetstream_sync.AuthorizationError):
        jetstream_sync.connect(pool, **spec.bad)
    # The monitor may list the closed connections a moment after the client saw the refusal.
    wait_for(lambda: len(auth_failures(server)) >= 2, message="the server recorded no attempts")
    assert len(auth_failures(server)) == 2


def test_credentials_refused_on_reconnect_close_after_two_attempts(tmp_path: Path) -> None:
    """After a password rotation the client tries twice (with back-off), then closes."""
    server = NatsServer(directory=tmp_path / "s", jetstream=False, user="svc", password="old-pw")
    server.start()
    errors: list[BaseException] = []
    closed = threading.Event()
    try:
        nc = jetstream_sync.connect(
            server.url,
            user="svc",
            password="old-pw",
            reconnect_time_wait=0.5,
            max_reconnect_attempts=60,
            error_cb=errors.append,
            closed_cb=closed.set,
        )
        try:
            server.password = "new-pw"
            server.restart()
            assert closed.wait(15), "the client kept reconnecting with refused credentials"
            assert nc.is_closed
            with pytest.raises(jetstream_sync.ConnectionClosedError):
                nc.publish("after.close", b"x")
        finally:
            nc.close()
        # the server lists a closed connection a moment after closing it
        wait_for(
            lambda: len(auth_failures(server)) >= 2,
            message="the server recorded fewer than two refused attempts",
        )
        attempts = auth_failures(server)
        assert len(attempts) == 2
        assert (attempts[1] - attempts[0]).total_seconds() >= 0.45  # reconnect_time_wait
        assert errors and all(isinstance(e, jetstream_sync.AuthorizationError) for e in errors)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("servers", "options", "error"),
    [
        ("http://svc:pw-SECRETVALUE-1@127.0.0.1:4222", {}, ValueError),
        ("nats://svc:pw-SECRETVALUE-1@127.0.0.1:notaport", {}, ValueError),
        ("nats://svc:pw/SECRETVALUE-1@127.0.0.1:4222", {}, ValueError),
        ("nats://svc:pw-SECRETVALUE-1@127.0.0.1:1", {}, jetstream_sync.NoServersError),
        ("nats://tok-SECRETVALUE-1@127.0.0.1:1", {}, jetstream_sync.NoServersError),
        ("nats://127.0.0.1:1", {"nkeys_seed": "SEEDCUT"}, jetstream_sync.NKeyError),
        ("nats://127.0.0.1:1", {"nkeys_seed": "SEEDLOWER"}, jetstream_sync.NKeyError),
        ("nats://127.0.0.1:1", {"nkeys_seed": "SEEDLONGER"}, jetstream_sync.NKeyError),
    ],
    ids=[
        "url-bad-scheme",
        "url-bad-port",
        "url-raw-slash",
        "url-password-refused",
        "url-token-refused",
        "seed-cut",
        "seed-lowercase",
        "seed-too-long",
    ],
)
def test_bad_input_errors_never_echo_secrets(servers, options, error) -> None:
    """Bad URLs carrying credentials and mistyped seeds fail without quoting the secret."""
    seed = KeyPair.create().seed
    mistyped = {"SEEDCUT": seed[:-3], "SEEDLOWER": seed.lower(), "SEEDLONGER": seed + "AB"}
    options = {k: mistyped.get(v, v) for k, v in options.items()}
    with pytest.raises(error) as caught:
        jetstream_sync.connect(servers, connect_timeout=0.5, allow_reconnect=False, **options)
    assert_no_secret([error_text(caught.value)], ["SECRETVALUE", seed, seed.lower()])


def test_a_mistyped_seed_file_path_is_still_named(tmp_path: Path) -> None:
    """A seed option naming a missing file says which file (a path is no secret)."""
    missing = tmp_path / "missing.nk"
    with pytest.raises(jetstream_sync.NKeyError, match="missing.nk"):
        jetstream_sync.connect("nats://127.0.0.1:1", nkeys_seed=str(missing))


def test_spark_options_and_dev_server_reprs_hide_secrets() -> None:
    """The Spark data source's options and the dev server show no credential in repr()."""
    from jetstream_sync.spark._options import BATCH_READ, Options
    from jetstream_sync.testing import NatsServer as DevServer

    seed = KeyPair.create().seed
    options = Options(
        {
            "servers": "nats://svc:pw-SECRETVALUE@h1:4222,nats://tok-SECRETVALUE@h2:4222",
            "password": "pw-SECRETVALUE",
            "token": "tok-SECRETVALUE",
            "nkeys_seed": seed,
        },
        BATCH_READ,
    )
    dev = DevServer(jetstream=False, args=("--user", "u", "--pass", "pw-SECRETVALUE"))
    assert_no_secret([repr(options), str(options), repr(dev)], ["SECRETVALUE", seed])
    assert "h1:4222" in repr(options)
