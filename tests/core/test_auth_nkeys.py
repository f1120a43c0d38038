"""NKey and JWT/creds authentication: the Ed25519 and nkey encoding units, then real servers."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync import _nkeys
from jetstream_sync._nkeys import (
    PREFIX_ACCOUNT,
    PREFIX_OPERATOR,
    PREFIX_USER,
    KeyPair,
    decode_public_key,
    decode_seed,
    encode_public_key,
    encode_seed,
    parse_creds,
)
from tests.fixtures.nkeys_auth import Operator, b64url, creds_text, nkey_server_for, user_jwt
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

# -- Ed25519: RFC 8032, section 7.1, TEST 1 to 3 ------------------------------------

RFC8032_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
        "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032_VECTORS)
def test_ed25519_rfc8032_vectors(secret, public, message, signature):
    """Public key and signature match RFC 8032's test vectors exactly."""
    seed = bytes.fromhex(secret)
    assert _nkeys.ed25519_public_key(seed).hex() == public
    assert _nkeys.ed25519_sign(seed, bytes.fromhex(message)).hex() == signature
    pair = KeyPair(PREFIX_USER, seed)
    assert pair.raw_public_key.hex() == public
    assert pair.sign(bytes.fromhex(message)).hex() == signature


def test_signing_adds_table_points_and_doubles_none(monkeypatch):
    """Once the base point's table is built, a signature is one scalar multiplication of
    at most 253 point additions and no doubling (what keeps it near a millisecond; its
    time is the benchmarks' to measure, not a test's)."""
    pair = KeyPair.create()
    pair.sign(b"warm-up")  # builds the table, derives the public key
    counts = {"add": 0, "double": 0}
    add, double = _nkeys._add, _nkeys._double

    def counted_add(a: Any, b: Any) -> Any:
        counts["add"] += 1
        return add(a, b)

    def counted_double(a: Any) -> Any:
        counts["double"] += 1
        return double(a)

    monkeypatch.setattr(_nkeys, "_add", counted_add)
    monkeypatch.setattr(_nkeys, "_double", counted_double)
    pair.sign(b"nonce")
    assert counts["double"] == 0
    assert 0 < counts["add"] <= 253  # r < L < 2**253: one addition per set bit


# -- nkey encoding ----------------------------------------------------------------------


def test_crc16_is_xmodem():
    """The checksum is CRC-16/XMODEM (check value of "123456789" is 0x31C3)."""
    assert _nkeys.crc16(b"123456789") == 0x31C3
    assert _nkeys.crc16(b"") == 0


def test_seed_round_trip_and_prefixes():
    """Seeds and public keys encode and decode back, with their type letters."""
    raw = bytes(range(32))
    for prefix, letter in [(PREFIX_USER, "U"), (PREFIX_ACCOUNT, "A"), (PREFIX_OPERATOR, "O")]:
        seed = encode_seed(prefix, raw)
        assert seed.startswith("S" + letter) and len(seed) == 58
        assert decode_seed(seed) == (prefix, raw)
        pair = KeyPair.from_seed(seed)
        assert pair.seed == seed and pair.raw_seed == raw
        public = pair.public_key
        assert public.startswith(letter) and len(public) == 56
        assert decode_public_key(public, prefix) == (prefix, pair.raw_public_key)
        assert encode_public_key(prefix, pair.raw_public_key) == public
    assert KeyPair.from_seed(encode_seed(PREFIX_USER, raw).encode()).raw_seed == raw


def _corrupt(text: str, index: int = 10) -> str:
    """``text`` with one base32 character changed."""
    return text[:index] + ("B" if text[index] != "B" else "C") + text[index + 1 :]


def test_checksum_failure_raises_nkey_error():
    """A seed or public key with one character changed fails its CRC."""
    pair = KeyPair.create()
    with pytest.raises(js.NKeyError, match="checksum"):
        decode_seed(_corrupt(pair.seed))
    with pytest.raises(js.NKeyError, match="checksum"):
        decode_public_key(_corrupt(pair.public_key))


def test_wrong_prefix_raises_nkey_error():
    """An account seed, a public key or garbage is refused where a user seed belongs."""
    account = KeyPair.create(PREFIX_ACCOUNT)
    with pytest.raises(js.NKeyError, match="expected a user seed"):
        decode_seed(account.seed, PREFIX_USER)
    not_seed = bytes([PREFIX_USER, 0]) + bytes(32)
    not_seed += _nkeys.crc16(not_seed).to_bytes(2, "little")
    with pytest.raises(js.NKeyError, match="not a seed"):
        decode_seed(base64.b32encode(not_seed).decode().rstrip("="))
    with pytest.raises(js.NKeyError, match="expected a user public key"):
        decode_public_key(account.public_key, PREFIX_USER)
    with pytest.raises(js.NKeyError, match="base32"):
        decode_seed("SU-not-a-seed")
    with pytest.raises(js.NKeyError):
        decode_seed("")
    with pytest.raises(js.NKeyError, match="user seed"):
        js.Client(nkeys_seed=account.seed)


def test_nkey_error_is_a_value_error():
    """NKeyError is bad input: a NatsError and a ValueError."""
    assert issubclass(js.NKeyError, js.NatsError)
    assert issubclass(js.NKeyError, ValueError)
    assert js.errors.NKeyError is js.NKeyError


def test_matches_the_nkeys_package():
    """Public keys, seeds and signatures agree with the official nkeys package."""
    nkeys = pytest.importorskip("nkeys")
    for _ in range(5):
        ours = KeyPair.create()
        theirs = nkeys.from_seed(ours.seed.encode())
        assert theirs.public_key.decode() == ours.public_key
        nonce = base64.urlsafe_b64encode(ours.raw_seed[:11]).rstrip(b"=")
        assert theirs.sign(nonce) == ours.sign(nonce)
        assert theirs.verify(nonce, ours.sign(nonce))


# -- .creds files -------------------------------------------------------------------------

_JWT = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQUJDIn0.c2lnbmF0dXJl"


def test_parse_creds_variants():
    """The nsc layout, CRLF, extra dashes, indentation and unlabelled blocks all parse."""
    seed = KeyPair.create().seed
    standard = creds_text(_JWT, seed)
    assert parse_creds(standard) == (_JWT, seed)
    assert parse_creds(standard.replace("\n", "\r\n")) == (_JWT, seed)
    decorated = (
        "# my credentials\n\n"
        "--------- BEGIN NATS USER JWT ---------\n\n"
        f"   {_JWT}   \n\n"
        "----------- END NATS USER JWT -----------\n"
        "garbage between blocks\n"
        "\t---BEGIN USER NKEY SEED---\n"
        f"\t{seed}\n"
        "\t---END USER NKEY SEED---"  # no newline at the end
    )
    assert parse_creds(decorated) == (_JWT, seed)
    unlabelled = f"-----\n{_JWT}\n-----\n-----\n{seed}\n-----\n"
    assert parse_creds(unlabelled) == (_JWT, seed)
    seed_first = (
        f"---BEGIN USER NKEY SEED---\n{seed}\n---END USER NKEY SEED---\n"
        f"---BEGIN NATS USER JWT---\n{_JWT}\n---END NATS USER JWT---\n"
    )
    assert parse_creds(seed_first) == (_JWT, seed)


def test_parse_creds_rejects_malformed_files():
    """A missing block, a non-JWT or a bad or non-user seed raises NKeyError."""
    seed = KeyPair.create().seed
    with pytest.raises(js.NKeyError, match="no user JWT"):
        parse_creds("nothing here\n")
    with pytest.raises(js.NKeyError, match="no nkey seed"):
        parse_creds(f"-----BEGIN NATS USER JWT-----\n{_JWT}\n------END NATS USER JWT------\n")
    with pytest.raises(js.NKeyError, match="does not hold a JWT"):
        parse_creds(creds_text("not a jwt", seed))
    with pytest.raises(js.NKeyError, match="checksum"):
        parse_creds(creds_text(_JWT, _corrupt(seed)))
    with pytest.raises(js.NKeyError, match="user seed"):
        parse_creds(creds_text(_JWT, KeyPair.create(PREFIX_ACCOUNT).seed))


def test_client_validates_options_before_connecting(tmp_path):
    """Bad paths, seeds and creds raise NKeyError at construction, before any connection."""
    with pytest.raises(js.NKeyError, match="cannot read"):
        js.connect("nats://127.0.0.1:1", nkeys_seed=str(tmp_path / "missing.nk"))
    with pytest.raises(js.NKeyError, match="cannot read"):
        js.connect("nats://127.0.0.1:1", user_credentials=tmp_path / "missing.creds")
    (tmp_path / "empty.nk").write_text("\n")
    with pytest.raises(js.NKeyError, match="no nkey seed"):
        js.Client(nkeys_seed=tmp_path / "empty.nk")
    (tmp_path / "bad.creds").write_text(creds_text(_JWT, "SUNOPE"))
    with pytest.raises(js.NKeyError):
        js.Client(user_credentials=str(tmp_path / "bad.creds"))
    seed = KeyPair.create().seed
    with pytest.raises(js.NKeyError, match="checksum"):
        js.Client(nkeys_seed=_corrupt(seed))
    (tmp_path / "ok.creds").write_text(creds_text(_JWT, seed))
    with pytest.raises(js.NKeyError, match="exclusive"):
        js.Client(nkeys_seed=seed, user_credentials=tmp_path / "ok.creds")
    assert js.Client(nkeys_seed=seed) is not None  # unconnected: nothing to close
    assert js.Client(user_credentials=tmp_path / "ok.creds") is not None


# -- plain nkey authentication against a server -------------------------------------------


def _round_trip(nc: js.Client, subject: str = "auth.check") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"hello")
    assert sub.next_msg(timeout=5).data == b"hello"


@pytest.fixture(scope="module")
def nkey_users():
    """Two authorized user key pairs."""
    return KeyPair.create(), KeyPair.create()


def connected_users(server: NatsServer) -> list[str | None]:
    """The user (nkey) each client connection of ``server`` authenticated as."""
    return [c.get("authorized_user") for c in server.monitor("connz", auth=True)["connections"]]


@pytest.fixture(scope="module")
def nkey_server(nkey_users):
    """A server that admits only the two users' nkeys."""
    with nkey_server_for(nkey_users) as s:
        yield s


def test_nkey_auth_with_seed_string(nkey_server, nkey_users):
    """A user seed string authenticates; pub/sub works."""
    assert "nonce" in nkey_server.info
    with js.connect(nkey_server.url, nkeys_seed=nkey_users[0].seed) as nc:
        _round_trip(nc)


def test_nkey_auth_with_seed_file(nkey_server, nkey_users, tmp_path):
    """A path (str or Path) to a seed file, bare or decorated, authenticates."""
    bare = tmp_path / "user.nk"
    bare.write_text(nkey_users[0].seed + "\n")
    decorated = tmp_path / "decorated.nk"
    decorated.write_text(
        f"-----BEGIN USER NKEY SEED-----\n{nkey_users[1].seed}\n------END USER NKEY SEED------\n"
    )
    for path in (str(bare), bare, decorated):
        with js.connect(nkey_server.url, nkeys_seed=path) as nc:
            _round_trip(nc)


def test_seed_and_creds_files_saved_with_a_byte_order_mark_authenticate(
    nkey_server, nkey_users, operator_server, operator, tmp_path
):
    """Windows editors save UTF-8 with a BOM first; the files are still read."""
    seed = tmp_path / "bom.nk"
    seed.write_text(nkey_users[0].seed + "\r\n", encoding="utf-8-sig")
    with js.connect(nkey_server.url, nkeys_seed=seed) as nc:
        _round_trip(nc)
    creds = operator.creds(tmp_path / "user.creds")
    creds.write_text(creds.read_text(), encoding="utf-8-sig")
    with js.connect(operator_server.url, user_credentials=creds) as nc:
        _round_trip(nc)


def test_nkey_on_a_server_without_auth(shared_server):
    """With no nonce in INFO nothing is signed, and the connection works."""
    with js.connect(shared_server.url, nkeys_seed=KeyPair.create().seed) as nc:
        _round_trip(nc)


def test_unknown_nkey_is_rejected(nkey_server):
    """A seed the server does not know, or none at all, raises AuthorizationError."""
    with pytest.raises(js.AuthorizationError):
        js.connect(nkey_server.url, nkeys_seed=KeyPair.create().seed, allow_reconnect=False)
    with pytest.raises(js.AuthorizationError):
        js.connect(nkey_server.url, allow_reconnect=False)


def test_seed_file_is_read_again_on_reconnect(nkey_users, tmp_path):
    """After the seed file is rotated, the reconnect authenticates with the new key."""
    first, second = nkey_users
    path = tmp_path / "rotating.nk"
    path.write_text(first.seed)
    with nkey_server_for(nkey_users) as server:
        nc = js.connect(server.url, nkeys_seed=path, reconnect_time_wait=0.1)
        try:
            _round_trip(nc)
            assert connected_users(server) == [first.public_key]
            path.write_text(second.seed)
            server.restart()
            wait_for(lambda: nc.stats.reconnects == 1 and nc.is_connected, timeout=10)
            _round_trip(nc)
            assert connected_users(server) == [second.public_key]
        finally:
            nc.close()


# -- JWT / creds authentication (operator mode) ---------------------------------------------


@pytest.fixture(scope="module")
def operator():
    """One operator with its accounts, shared by the module's tests."""
    return Operator()


@pytest.fixture(scope="module")
def operator_server(operator):
    """A server in operator mode trusting ``operator``'s accounts."""
    with NatsServer(jetstream=False, extra_config=operator.config()) as s:
        yield s


def test_creds_auth_pub_sub(operator_server, operator, tmp_path):
    """A .creds file (str or Path) authenticates in operator mode; pub/sub works."""
    creds = operator.creds(tmp_path / "user.creds")
    assert "nonce" in operator_server.info
    with js.connect(operator_server.url, user_credentials=creds) as nc:
        _round_trip(nc)
    with js.connect(operator_server.url, user_credentials=str(creds)) as nc:
        with js.connect(operator_server.url, user_credentials=creds) as other:
            sub = other.subscribe("shared.subject")
            other.flush()
            nc.publish("shared.subject", b"between two users")
            assert sub.next_msg(timeout=5).data == b"between two users"


def test_creds_signed_by_account_signing_key(operator_server, operator, tmp_path):
    """A user JWT issued by an account signing key (with issuer_account) authenticates."""
    user = KeyPair.create()
    jwt = user_jwt(operator.account, user, signer=operator.signing_key)
    creds = operator.creds(tmp_path / "signed.creds", user, jwt)
    with js.connect(operator_server.url, user_credentials=creds) as nc:
        _round_trip(nc)


def test_tampered_or_foreign_creds_are_rejected(operator_server, operator, tmp_path):
    """A JWT whose claims were edited, or that an unknown account signed, is refused."""
    user = KeyPair.create()
    header, payload, sig = user_jwt(operator.account, user).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["name"] = "mallory"
    forged = f"{header}.{b64url(json.dumps(claims).encode())}.{sig}"
    tampered = operator.creds(tmp_path / "tampered.creds", user, forged)
    with pytest.raises(js.AuthorizationError):
        js.connect(operator_server.url, user_credentials=tampered, allow_reconnect=False)
    stranger = KeyPair.create(PREFIX_ACCOUNT)
    foreign = operator.creds(tmp_path / "foreign.creds", user, user_jwt(stranger, user))
    with pytest.raises(js.AuthorizationError):
        js.connect(operator_server.url, user_credentials=foreign, allow_reconnect=False)
    wrong_seed = operator.creds(
        tmp_path / "wrong-seed.creds", KeyPair.create(), user_jwt(operator.account, user)
    )
    with pytest.raises(js.AuthorizationError):
        js.connect(operator_server.url, user_credentials=wrong_seed, allow_reconnect=False)


@pytest.mark.interop
def test_creds_interop_with_nats_py(operator_server, operator, tmp_path):
    """nats-py accepts the same .creds file and talks to a jetstream_sync user."""
    nats = pytest.importorskip("nats")
    creds = operator.creds(tmp_path / "shared.creds")

    async def publish() -> None:
        client = await nats.connect(operator_server.url, user_credentials=str(creds))
        await client.publish("interop.creds", b"from nats-py")
        await client.flush()
        await client.close()

    with js.connect(operator_server.url, user_credentials=creds) as nc:
        sub = nc.subscribe("interop.creds")
        nc.flush()
        asyncio.run(publish())
        assert sub.next_msg(timeout=5).data == b"from nats-py"
