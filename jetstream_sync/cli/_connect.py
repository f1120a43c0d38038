"""The connection every command shares: options from flags and environment, secrets kept out.

Flags win over the environment: ``--server`` / ``NATS_URL``, ``--user`` /
``NATS_USER``, ``--password`` / ``NATS_PASSWORD``, ``--token`` /
``NATS_TOKEN``, ``--creds`` / ``NATS_CREDS``, ``--nkey`` / ``NATS_NKEY``,
``--tls-ca`` / ``NATS_CA``, ``--tls-cert`` / ``NATS_CERT``, ``--tls-key`` /
``NATS_KEY`` (the same names as the ``nats`` CLI).
"""

from __future__ import annotations

import argparse
import os
import ssl
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..client import Client, connect
from ..errors import NoServersError
from ._errors import CommandError

DEFAULT_URL = "nats://127.0.0.1:4222"
CLIENT_NAME = "jetstream-sync"
# option dest -> environment variable
ENVIRONMENT = {
    "server": "NATS_URL",
    "user": "NATS_USER",
    "password": "NATS_PASSWORD",
    "token": "NATS_TOKEN",
    "creds": "NATS_CREDS",
    "nkey": "NATS_NKEY",
    "tls_ca": "NATS_CA",
    "tls_cert": "NATS_CERT",
    "tls_key": "NATS_KEY",
}


def add_connection_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The connection flags; ``suppress`` leaves them unset when absent (for subcommands)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("connection")
    group.add_argument(
        "-s",
        "--server",
        metavar="URL",
        default=default(None),
        help=f"server URL(s), comma-separated (env NATS_URL; default {DEFAULT_URL})",
    )
    group.add_argument("--user", default=default(None), help="username (env NATS_USER)")
    group.add_argument("--password", default=default(None), help="password (env NATS_PASSWORD)")
    group.add_argument("--token", default=default(None), help="auth token (env NATS_TOKEN)")
    group.add_argument(
        "--creds",
        metavar="FILE",
        default=default(None),
        help="user credentials (.creds) file (env NATS_CREDS)",
    )
    group.add_argument(
        "--nkey", metavar="FILE", default=default(None), help="NKey user seed file (env NATS_NKEY)"
    )
    group.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=default(None),
        help="CA certificate(s) to verify the server with (env NATS_CA)",
    )
    group.add_argument(
        "--tls-cert",
        metavar="FILE",
        default=default(None),
        help="client certificate (env NATS_CERT)",
    )
    group.add_argument(
        "--tls-key",
        metavar="FILE",
        default=default(None),
        help="client certificate's key (env NATS_KEY)",
    )


def option(args: argparse.Namespace, dest: str) -> str | None:
    """The flag's value, else its environment variable's, else None."""
    value = getattr(args, dest, None)
    if value is None:
        value = os.environ.get(ENVIRONMENT[dest]) or None
    return value


def server_urls(args: argparse.Namespace) -> list[str]:
    """The server URLs to try."""
    text = option(args, "server") or DEFAULT_URL
    return [u.strip() for u in text.split(",") if u.strip()]


def secrets(args: argparse.Namespace) -> list[str]:
    """Every secret the user gave (passwords and tokens, also inside URLs): never printed."""
    found = [option(args, "password"), option(args, "token")]
    for url in server_urls(args):
        found.append(_url_secret(url))
    return [s for s in found if s]


def _url_secret(url: str) -> str | None:
    """The password of ``user:password@``, or the token of ``token@``, in ``url``.

    Split by hand, as the library's ``redact_url`` does (the last ``@`` ends the
    credentials): ``urlsplit`` raises on a URL such as ``nats://u:p@[::1``, and the
    error naming that URL must still hide its password.
    """
    rest = url.partition("://")[2] if "://" in url else url
    userinfo, at, _ = rest.rpartition("@")
    if not at:
        return None
    user, colon, password = userinfo.partition(":")
    return password if colon else user


def redact(text: str, args: argparse.Namespace) -> str:
    """``text`` with every secret of ``args`` replaced by ``***``."""
    for secret in sorted(secrets(args), key=len, reverse=True):
        text = text.replace(secret, "***")
        quoted = urllib.parse.quote(secret, safe="")
        if quoted != secret:
            text = text.replace(quoted, "***")
    return text


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """A verifying TLS context when a CA or a client certificate was given, else None.

    Raises:
        CommandError: a file cannot be read, or is not a certificate or a key.
    """
    ca, cert, key = option(args, "tls_ca"), option(args, "tls_cert"), option(args, "tls_key")
    if not (ca or cert):
        return None
    try:
        context = ssl.create_default_context(cafile=ca)
    except OSError as exc:
        raise CommandError(f"cannot load the CA file {ca}: {_reason(exc)}") from None
    if cert:
        try:
            context.load_cert_chain(cert, key)
        except OSError as exc:
            raise CommandError(
                f"cannot load the client certificate {cert}: {_reason(exc)}"
            ) from None
    return context


def connect_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``connect`` for these flags."""
    options: dict[str, Any] = {"name": CLIENT_NAME, "connect_timeout": args.timeout}
    for dest, name in (
        ("user", "user"),
        ("password", "password"),
        ("token", "token"),
        ("creds", "user_credentials"),
        ("nkey", "nkeys_seed"),
    ):
        value = option(args, dest)
        if value is not None:
            options[name] = value
    context = tls_context(args)
    if context is not None:
        options["tls"] = context
    return options


@contextmanager
def session(args: argparse.Namespace) -> Iterator[Client]:
    """A connected client, drained of what it published and closed at the end.

    Raises:
        NoServersError: no server could be reached (the message names them,
            without credentials).
    """
    urls = server_urls(args)
    try:
        client = connect(urls, **connect_options(args))
    except NoServersError as exc:
        shown = ", ".join(_without_userinfo(u) for u in urls)
        reason = exc.__cause__ if exc.__cause__ is not None else exc
        raise NoServersError(f"cannot connect to {shown}: {_reason(reason)}") from None
    with client:
        yield client


def _without_userinfo(url: str) -> str:
    """``nats://user:pass@host:4222`` -> ``nats://host:4222``."""
    scheme, sep, rest = url.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def _reason(exc: BaseException) -> str:
    """``connection refused`` rather than ``ConnectionRefusedError(111, ...)``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the server's TLS certificate is not trusted ({exc.verify_message}; see --tls-ca)"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__
