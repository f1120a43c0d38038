"""NATS nkeys and ``.creds`` files: Ed25519 signing in pure Python and the key encoding.

Ed25519 follows RFC 8032 (section 5.1): keys are 32-byte seeds, signatures are
64 bytes, signing is deterministic. Only signing and public-key derivation are
needed by a client, so there is no verification here. Group arithmetic uses
extended twisted-Edwards coordinates on Python integers and a lazily built
table of the base point's powers of two, so one signature costs about a
millisecond.

An nkey is text: RFC 4648 base32 (no padding) of ``prefix || key || crc16``,
the CRC being CRC-16/XMODEM (polynomial 0x1021, initial 0) stored little
endian. A public key has one prefix byte whose top five bits name its type
(``U`` user, ``A`` account, ``O`` operator, ...). A seed has two: the seed
marker (``S``) in the top five bits of the first, the key type split over the
rest, so a user seed reads ``SU...``.

A ``.creds`` file holds a user JWT and the user's seed, each between dashed
marker lines (``-----BEGIN NATS USER JWT-----`` ... ``------END NATS USER
JWT------``), usually with a warning banner in between.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import secrets
from typing import NamedTuple

from .errors import NKeyError

# -- Ed25519 (RFC 8032, section 5.1) -------------------------------------------

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, -1, _P) % _P
_D2 = 2 * _D % _P
_BX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_BY = 46316835694926478169428394003475163141307993866256225615783033603165251855960

_Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T), x=X/Z, y=Y/Z, xy=T/Z

_IDENTITY: _Point = (0, 1, 1, 0)
_BASE: _Point = (_BX, _BY, 1, _BX * _BY % _P)


def _add(a: _Point, b: _Point) -> _Point:
    """Point addition (the RFC's unified formula, valid for doubling too)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa = (y1 - x1) * (y2 - x2) % _P
    bb = (y1 + x1) * (y2 + x2) % _P
    cc = t1 * _D2 * t2 % _P
    dd = 2 * z1 * z2 % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _double(a: _Point) -> _Point:
    """Point doubling (RFC 8032, section 5.1.4)."""
    x1, y1, z1, _t1 = a
    aa = x1 * x1 % _P
    bb = y1 * y1 % _P
    cc = 2 * z1 * z1 % _P
    h = aa + bb
    e = h - (x1 + y1) * (x1 + y1) % _P
    g = aa - bb
    f = cc + g
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


_BASE_POWERS: list[_Point] = []  # B * 2**i for i in 0..255, built on first use


def _base_mult(scalar: int) -> _Point:
    """``scalar * B`` by adding precomputed powers of two of the base point."""
    if not _BASE_POWERS:
        powers, point = [], _BASE
        for _ in range(256):
            powers.append(point)
            point = _double(point)
        _BASE_POWERS[:] = powers
    result = _IDENTITY
    i = 0
    while scalar:
        if scalar & 1:
            result = _add(result, _BASE_POWERS[i])
        scalar >>= 1
        i += 1
    return result


def _encode_point(point: _Point) -> bytes:
    """The 32-byte encoding: y little endian, the top bit holding x's parity."""
    x, y, z, _t = point
    inverse = pow(z, -1, _P)
    x, y = x * inverse % _P, y * inverse % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _expand(seed: bytes) -> tuple[int, bytes]:
    """The secret scalar (clamped) and the nonce prefix derived from a 32-byte seed."""
    digest = hashlib.sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little")
    scalar &= (1 << 254) - 8
    scalar |= 1 << 254
    return scalar, digest[32:]


def ed25519_public_key(seed: bytes) -> bytes:
    """The 32-byte Ed25519 public key of a 32-byte private seed."""
    if len(seed) != 32:
        raise NKeyError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
    scalar, _prefix = _expand(seed)
    return _encode_point(_base_mult(scalar))


def ed25519_sign(seed: bytes, message: bytes, public_key: bytes | None = None) -> bytes:
    """The 64-byte Ed25519 signature of ``message`` by the key of ``seed``.

    ``public_key`` may be given to skip deriving it again.
    """
    if len(seed) != 32:
        raise NKeyError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
    scalar, prefix = _expand(seed)
    if public_key is None:
        public_key = _encode_point(_base_mult(scalar))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    big_r = _encode_point(_base_mult(r))
    k = int.from_bytes(hashlib.sha512(big_r + public_key + message).digest(), "little") % _L
    s = (r + k * scalar) % _L
    return big_r + s.to_bytes(32, "little")


# -- nkey text encoding ----------------------------------------------------------

PREFIX_SEED = 18 << 3  # "S"
PREFIX_PRIVATE = 15 << 3  # "P"
PREFIX_SERVER = 13 << 3  # "N"
PREFIX_CLUSTER = 2 << 3  # "C"
PREFIX_OPERATOR = 14 << 3  # "O"
PREFIX_ACCOUNT = 0  # "A"
PREFIX_USER = 20 << 3  # "U"
PREFIX_CURVE = 23 << 3  # "X"

_PUBLIC_PREFIXES = {
    PREFIX_SERVER: "server",
    PREFIX_CLUSTER: "cluster",
    PREFIX_OPERATOR: "operator",
    PREFIX_ACCOUNT: "account",
    PREFIX_USER: "user",
    PREFIX_CURVE: "curve",
}


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def _b32encode(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=")


def _checked(text: str | bytes, what: str) -> bytes:
    """Base32-decode ``text`` and verify and strip its trailing CRC-16."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise NKeyError(f"invalid {what}: not ASCII") from None
    text = text.strip()
    if not text or not re.fullmatch(r"[A-Z2-7]+", text):
        raise NKeyError(f"invalid {what}: not base32 (A-Z, 2-7)")
    try:
        raw = base64.b32decode(text + "=" * (-len(text) % 8))
    except binascii.Error:
        raise NKeyError(f"invalid {what}: bad base32 length") from None
    if len(raw) < 3:
        raise NKeyError(f"invalid {what}: too short")
    body, stored = raw[:-2], int.from_bytes(raw[-2:], "little")
    if crc16(body) != stored:
        raise NKeyError(f"invalid {what}: checksum mismatch")
    return body


def _prefix_name(prefix: int) -> str:
    return _PUBLIC_PREFIXES.get(prefix, f"unknown ({prefix:#04x})")


def encode_public_key(prefix: int, key: bytes) -> str:
    """The text form (``U...``, ``A...``) of a 32-byte public key of type ``prefix``."""
    if prefix not in _PUBLIC_PREFIXES:
        raise NKeyError(f"invalid public key prefix {prefix:#04x}")
    if len(key) != 32:
        raise NKeyError(f"a public key is 32 bytes, not {len(key)}")
    raw = bytes([prefix]) + key
    return _b32encode(raw + crc16(raw).to_bytes(2, "little"))


def decode_public_key(text: str | bytes, expected: int | None = None) -> tuple[int, bytes]:
    """Split a public key's text into (prefix, 32-byte key).

    Raises:
        NKeyError: bad encoding, checksum, length, or a prefix other than ``expected``.
    """
    body = _checked(text, "public nkey")
    if len(body) != 33:
        raise NKeyError("invalid public nkey: wrong length")
    prefix = body[0]
    if prefix not in _PUBLIC_PREFIXES:
        raise NKeyError(f"invalid public nkey: unknown prefix {prefix:#04x}")
    if expected is not None and prefix != expected:
        raise NKeyError(
            f"expected a {_prefix_name(expected)} public key, got a {_prefix_name(prefix)} key"
        )
    return prefix, body[1:]


def encode_seed(prefix: int, seed: bytes) -> str:
    """The text form (``SU...``, ``SA...``) of a 32-byte private seed of key type ``prefix``."""
    if prefix not in _PUBLIC_PREFIXES:
        raise NKeyError(f"invalid seed key type {prefix:#04x}")
    if len(seed) != 32:
        raise NKeyError(f"a seed is 32 bytes, not {len(seed)}")
    raw = bytes([PREFIX_SEED | (prefix >> 5), (prefix & 0x1F) << 3]) + seed
    return _b32encode(raw + crc16(raw).to_bytes(2, "little"))


def decode_seed(text: str | bytes, expected: int | None = None) -> tuple[int, bytes]:
    """Split a seed's text into (key type prefix, 32-byte private seed).

    Raises:
        NKeyError: bad encoding, checksum or length, not a seed, or a key type
            other than ``expected``.
    """
    body = _checked(text, "nkey seed")
    if len(body) != 34:
        raise NKeyError("invalid nkey seed: wrong length")
    if body[0] & 0xF8 != PREFIX_SEED:
        raise NKeyError("invalid nkey seed: not a seed (it must start with 'S')")
    prefix = ((body[0] & 0x07) << 5) | ((body[1] & 0xF8) >> 3)
    if prefix not in _PUBLIC_PREFIXES:
        raise NKeyError(f"invalid nkey seed: unknown key type {prefix:#04x}")
    if expected is not None and prefix != expected:
        raise NKeyError(
            f"expected a {_prefix_name(expected)} seed, got a {_prefix_name(prefix)} seed"
        )
    return prefix, body[2:]


class KeyPair:
    """An nkey pair held as its private seed: the public key and signatures derive from it."""

    __slots__ = ("prefix", "_seed", "_public")

    def __init__(self, prefix: int, seed: bytes) -> None:
        if prefix not in _PUBLIC_PREFIXES:
            raise NKeyError(f"invalid key type {prefix:#04x}")
        if len(seed) != 32:
            raise NKeyError(f"a seed is 32 bytes, not {len(seed)}")
        self.prefix = prefix
        self._seed = bytes(seed)
        self._public = ed25519_public_key(self._seed)

    @classmethod
    def from_seed(cls, text: str | bytes, expected: int | None = None) -> KeyPair:
        """The pair of an encoded seed (``SU...``); see :func:`decode_seed` for errors."""
        prefix, seed = decode_seed(text, expected)
        return cls(prefix, seed)

    @classmethod
    def create(cls, prefix: int = PREFIX_USER) -> KeyPair:
        """A new random pair of key type ``prefix``."""
        return cls(prefix, secrets.token_bytes(32))

    @property
    def seed(self) -> str:
        """The encoded seed (``SU...``): the secret."""
        return encode_seed(self.prefix, self._seed)

    @property
    def raw_seed(self) -> bytes:
        """The 32-byte private seed."""
        return self._seed

    @property
    def public_key(self) -> str:
        """The encoded public key (``U...``)."""
        return encode_public_key(self.prefix, self._public)

    @property
    def raw_public_key(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self._public

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data`` (a server's nonce, a JWT's header.payload)."""
        return ed25519_sign(self._seed, bytes(data), self._public)

    def __repr__(self) -> str:
        return f"<KeyPair {self.public_key}>"


# -- seed option and .creds files ---------------------------------------------------

_SEED_TEXT = re.compile(r"S[A-Z2-7]{57}")
# What is meant as a seed but mistyped (cut, lower-cased...): never echoed as a "path".
_SEED_LIKE = re.compile(r"[Ss][A-Za-z2-7]{20,}")
_JWT_TEXT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def _read_text(path: str | os.PathLike[str], what: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:  # a BOM, as Windows editors save
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise NKeyError(f"cannot read the {what} {os.fspath(path)!r}: {exc}") from exc


class Credentials(NamedTuple):
    """The contents of a ``.creds`` file: the user JWT and the user's seed."""

    jwt: str
    seed: str


def _blocks(text: str) -> list[tuple[str, str]]:
    """The (label, content) pairs between dashed marker lines, in file order."""
    blocks: list[tuple[str, str]] = []
    label: str | None = None
    content: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("---") and stripped.endswith("---"):
            if label is None:
                label, content = stripped.strip("-").strip().upper(), []
            else:
                blocks.append((label, "".join(content)))
                label = None
        elif label is not None and stripped:
            content.append(stripped)
    return blocks


def parse_creds(text: str) -> Credentials:
    """Find the user JWT and the seed in the text of a ``.creds`` file.

    Blocks are told apart by their labels (``...JWT...``, ``...SEED...``) or,
    unlabelled, by order (JWT first). Marker lines need three dashes or more on
    each side; blank lines, banners and ``\\r\\n`` line ends are ignored.

    Raises:
        NKeyError: a block is missing, or the JWT or seed is malformed.
    """
    blocks = [(label, body) for label, body in _blocks(text) if body]
    jwt = next((body for label, body in blocks if "JWT" in label), None)
    seed = next((body for label, body in blocks if "SEED" in label), None)
    unlabelled = [body for label, body in blocks if "JWT" not in label and "SEED" not in label]
    if jwt is None and unlabelled:
        jwt = unlabelled.pop(0)
    if seed is None and unlabelled:
        seed = unlabelled.pop(0)
    if jwt is None:
        raise NKeyError("credentials: no user JWT block found")
    if seed is None:
        raise NKeyError("credentials: no nkey seed block found")
    if not _JWT_TEXT.fullmatch(jwt):
        raise NKeyError("credentials: the JWT block does not hold a JWT (header.payload.sig)")
    decode_seed(seed, PREFIX_USER)
    return Credentials(jwt, seed)


def read_creds(path: str | os.PathLike[str]) -> Credentials:
    """Read and parse a ``.creds`` file (see :func:`parse_creds`).

    Raises:
        NKeyError: the file cannot be read or is malformed.
    """
    return parse_creds(_read_text(path, "credentials file"))


def _seed_in_file(text: str) -> str:
    """The seed in a seed file: the whole file, a decorated block, or a line of its own."""
    stripped = text.strip()
    if _SEED_TEXT.fullmatch(stripped):
        return stripped
    for label, body in _blocks(text):
        if "SEED" in label and body:
            return body
    for line in text.splitlines():
        word = line.strip()
        if word.startswith("S") and _SEED_TEXT.fullmatch(word):
            return word
    raise NKeyError("the seed file holds no nkey seed (a line starting with 'SU')")


class SeedSource:
    """The ``nkeys_seed`` option: a user seed, or a path to a file holding one.

    A seed string is decoded once; a file is read again by every
    :meth:`key_pair` call, so a rotated file is picked up on reconnect.
    Construction validates either, so mistakes show before connecting.
    """

    __slots__ = ("_pair", "_path")

    def __init__(self, value: str | os.PathLike[str]) -> None:
        self._pair: KeyPair | None = None
        self._path: str | os.PathLike[str] | None = None
        text = value.strip() if isinstance(value, str) else ""
        if _SEED_TEXT.fullmatch(text) or (_SEED_LIKE.fullmatch(text) and not os.path.exists(text)):
            # A seed, or a mistyped one: decoding names the defect, never the text.
            self._pair = KeyPair.from_seed(text, PREFIX_USER)
        elif isinstance(value, str | os.PathLike):
            self._path = value
            self.key_pair()
        else:
            raise NKeyError(f"nkeys_seed must be a seed or a path, not {type(value).__name__}")

    def key_pair(self) -> KeyPair:
        """The user key pair (re-reading the file, if the option named one)."""
        if self._pair is not None:
            return self._pair
        assert self._path is not None
        text = _read_text(self._path, "nkey seed file")
        return KeyPair.from_seed(_seed_in_file(text), PREFIX_USER)


class CredsSource:
    """The ``user_credentials`` option: a ``.creds`` file read again on every connect."""

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike):
            raise NKeyError(f"user_credentials must be a path, not {type(path).__name__}")
        self._path = path
        self.load()

    def load(self) -> tuple[str, KeyPair]:
        """Read the file now: (the user JWT, the user key pair)."""
        creds = read_creds(self._path)
        return creds.jwt, KeyPair.from_seed(creds.seed, PREFIX_USER)
