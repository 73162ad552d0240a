"""Java's JKS key store format, read with ``hashlib`` alone.

The layout (all integers big-endian)::

    u4 magic 0xFEEDFEED, u4 version (1 or 2), u4 entry count
    each entry: u4 tag, UTF alias (u2 length + modified UTF-8), u8 creation time (ms), then
      tag 1 (private key):     u4 length + EncryptedPrivateKeyInfo (DER),
                               u4 chain length, each: [v2: UTF type] u4 length + certificate
      tag 2 (trusted cert):    [v2: UTF type] u4 length + certificate
    20 bytes: SHA-1(password as UTF-16BE + b"Mighty Aphrodite" + every byte before them)

A private key is protected by Sun's key protector (OID 1.3.6.1.4.1.42.2.17.1.1): its
encrypted data is a 20-byte salt, the key XORed with a SHA-1 keystream
(``d1 = SHA-1(pw + salt)``, ``d2 = SHA-1(pw + d1)``, ...), and SHA-1(pw + key) to check the
password. The plain key is PKCS#8 DER.

Every length is checked against the bytes left, so a truncated or tampered store is a
``StoreError``, never an ``IndexError``; a wrong password is a ``WrongPasswordError``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

from .contents import PrivateKey, StoreContents, StoreError, WrongPasswordError
from .der import OCTET_STRING, OID, SEQUENCE, decode_oid, read_tlv

__all__ = ["MAGIC", "is_jks", "read_jks", "pkcs8_pem"]

MAGIC = 0xFEEDFEED
_JCEKS_MAGIC = 0xCECECECE
_DIGEST_SIZE = 20
_WHITENER = b"Mighty Aphrodite"
_KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1"
_PRIVATE_KEY, _TRUSTED_CERT, _SECRET_KEY = 1, 2, 3
_U2, _U4, _U8 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")


def is_jks(data: bytes) -> bool:
    return len(data) >= 4 and _U4.unpack_from(data)[0] == MAGIC


def _password_bytes(password: str) -> bytes:
    """A Java ``char[]`` password as the format hashes it: two bytes a UTF-16 unit."""
    return password.encode("utf-16-be", "surrogatepass")


class _Reader:
    """Bounded reads over the store's body (the digest excluded)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise StoreError(f"is not a valid JKS store (truncated {what})")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u2(self, what: str) -> int:
        return int(_U2.unpack(self.take(2, what))[0])

    def u4(self, what: str) -> int:
        return int(_U4.unpack(self.take(4, what))[0])

    def utf(self, what: str) -> str:
        return self.take(self.u2(what), what).decode("utf-8", "replace")

    def blob(self, what: str) -> bytes:
        return self.take(self.u4(what), what)


def read_jks(data: bytes, password: str | None, key_password: str | None = None) -> StoreContents:
    """The trusted certificates and the private keys of a JKS store.

    ``password`` checks the store's integrity digest (``None``: not checked, as Java loads
    a trust store without a password); ``key_password`` decrypts the private keys
    (``None``: the store's password, as keytool makes them)."""
    if len(data) < 12 + _DIGEST_SIZE:
        raise StoreError("is not a JKS store (too short)")
    magic = _U4.unpack_from(data)[0]
    if magic == _JCEKS_MAGIC:
        raise StoreError("is a JCEKS store, not JKS; convert it to PKCS12 or JKS with keytool")
    if magic != MAGIC:
        raise StoreError("is not a JKS store (no JKS magic number)")
    body, digest = data[:-_DIGEST_SIZE], data[-_DIGEST_SIZE:]
    if password is not None:
        expected = hashlib.sha1(_password_bytes(password) + _WHITENER + body).digest()
        if not hmac.compare_digest(expected, digest):
            raise WrongPasswordError(
                "fails its integrity check: wrong password, or the file was altered"
            )
    reader = _Reader(body)
    reader.take(4, "header")
    version = reader.u4("header")
    if version not in (1, 2):
        raise StoreError(f"has an unsupported JKS version {version}")
    count = reader.u4("header")
    certificates: list[bytes] = []
    keys: list[PrivateKey] = []
    for _ in range(count):
        tag = reader.u4("entry")
        reader.utf("alias")
        reader.take(8, "entry timestamp")
        if tag == _TRUSTED_CERT:
            certificates.append(_certificate(reader, version))
        elif tag == _PRIVATE_KEY:
            protected = reader.blob("private key")
            chain = tuple(_certificate(reader, version) for _ in range(reader.u4("chain")))
            secret = key_password if key_password is not None else password
            if secret is None:
                raise StoreError("holds a private key but no password was given to decrypt it")
            keys.append(PrivateKey(pkcs8_pem(_unprotect(protected, secret)), chain))
        elif tag == _SECRET_KEY:
            raise StoreError("holds a secret key entry, which JKS cannot (a JCEKS store?)")
        else:
            raise StoreError(f"is not a valid JKS store (unknown entry tag {tag})")
    if reader.pos != len(body):
        raise StoreError("is not a valid JKS store (bytes after the last entry)")
    return StoreContents(tuple(certificates), tuple(keys))


def _certificate(reader: _Reader, version: int) -> bytes:
    if version == 2:
        kind = reader.utf("certificate type")
        if kind != "X.509":
            raise StoreError(f"holds a certificate of type {kind!r}, not X.509")
    return reader.blob("certificate")


def _unprotect(protected: bytes, password: str) -> bytes:
    """The PKCS#8 DER of a key protected by Sun's key protector."""
    tag, info, _ = read_tlv(protected, 0, "private key entry")
    if tag != SEQUENCE:
        raise StoreError("is not a valid JKS store (private key entry is not a DER sequence)")
    tag, algorithm, pos = read_tlv(info, 0, "private key algorithm")
    tag2, oid, _ = read_tlv(algorithm, 0, "private key algorithm")
    if tag != SEQUENCE or tag2 != OID:
        raise StoreError("is not a valid JKS store (bad private key algorithm)")
    if decode_oid(oid) != _KEY_PROTECTOR_OID:
        raise StoreError(
            f"holds a private key protected by algorithm {decode_oid(oid)}, not Sun's JKS "
            "key protector; convert the store to PKCS12 with keytool"
        )
    tag, encrypted, _ = read_tlv(info, pos, "encrypted private key")
    if tag != OCTET_STRING or len(encrypted) < 2 * _DIGEST_SIZE:
        raise StoreError("is not a valid JKS store (bad encrypted private key)")
    salt = encrypted[:_DIGEST_SIZE]
    body = encrypted[_DIGEST_SIZE:-_DIGEST_SIZE]
    check = encrypted[-_DIGEST_SIZE:]
    secret = _password_bytes(password)
    stream, block = bytearray(), salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(body, stream))
    if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
        raise WrongPasswordError(
            "holds a private key the key password does not decrypt: wrong "
            "kafka.ssl.key.password (default: the store's password)"
        )
    return plain


def pkcs8_pem(der: bytes) -> bytes:
    """PKCS#8 DER as an unencrypted ``PRIVATE KEY`` PEM block."""
    text = base64.encodebytes(der).replace(b"\n", b"")
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return b"-----BEGIN PRIVATE KEY-----\n" + b"\n".join(lines) + b"\n-----END PRIVATE KEY-----\n"
