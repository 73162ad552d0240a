"""PEM stores: files of type PEM, and the inline PEM options of KIP-651
(``ssl.truststore.certificates``, ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``).

As Kafka's Java client, the private key must be PKCS#8: ``PRIVATE KEY``, or
``ENCRYPTED PRIVATE KEY`` with ``ssl.key.password`` (OpenSSL decrypts it when the context
loads it).
"""

from __future__ import annotations

import base64
import binascii
import re

from .contents import PrivateKey, StoreContents, StoreError

__all__ = ["pem_blocks", "read_pem_trust", "read_pem_key"]

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.DOTALL)
_KEY_KINDS = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")


def pem_blocks(text: bytes) -> list[tuple[str, bytes]]:
    """``(label, DER)`` of each PEM block in ``text``."""
    blocks = []
    for match in _BLOCK.finditer(text):
        try:
            der = base64.b64decode(re.sub(rb"\s+", b"", match.group(2)), validate=True)
        except binascii.Error:
            raise StoreError(
                f"has a {match.group(1).decode()} PEM block that is not valid base64"
            ) from None
        blocks.append((match.group(1).decode(), der))
    return blocks


def _certificates(blocks: list[tuple[str, bytes]]) -> tuple[bytes, ...]:
    return tuple(der for label, der in blocks if label in ("CERTIFICATE", "TRUSTED CERTIFICATE"))


def read_pem_trust(text: bytes) -> StoreContents:
    """The certificates of a PEM trust store."""
    certificates = _certificates(pem_blocks(text))
    if not certificates:
        raise StoreError("holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return StoreContents(certificates)


def read_pem_key(chain: bytes, key: bytes | None = None) -> StoreContents:
    """The private key and certificate chain of a PEM key store: ``chain`` holds both (a
    file of type PEM), or ``key`` is given apart (the inline options)."""
    blocks = pem_blocks(chain if key is None else key)
    keys = [(label, der) for label, der in blocks if label.endswith("PRIVATE KEY")]
    if not keys:
        raise StoreError("holds no private key (-----BEGIN PRIVATE KEY-----)")
    if len(keys) > 1:
        raise StoreError("holds more than one private key")
    label, der = keys[0]
    if label not in _KEY_KINDS:
        raise StoreError(
            f"holds a {label}, but the key must be PKCS#8 (PRIVATE KEY or ENCRYPTED "
            "PRIVATE KEY): convert it with openssl pkcs8 -topk8"
        )
    certificates = _certificates(pem_blocks(chain))
    if not certificates:
        raise StoreError("holds no certificate chain (-----BEGIN CERTIFICATE-----)")
    body = base64.encodebytes(der).replace(b"\n", b"")
    lines = b"\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    key_pem = b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (
        label.encode(),
        lines,
        label.encode(),
    )
    return StoreContents((), (PrivateKey(key_pem, certificates, label != "PRIVATE KEY"),))
