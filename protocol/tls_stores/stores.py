"""One entry point per store kind: the bytes and the type in, ``StoreContents`` out.

A store whose bytes say it is of another type than the one given is refused naming both
(a JKS file given as PKCS12, a PEM file as JKS), so a wrong ``...type`` option is not
reported as a wrong password.
"""

from __future__ import annotations

from .contents import StoreContents, StoreError
from .jks import is_jks, read_jks
from .pem import read_pem_key, read_pem_trust
from .pkcs12 import read_pkcs12

__all__ = ["read_trust_store", "read_key_store", "sniff_type"]


def sniff_type(data: bytes) -> str | None:
    """The type the bytes look like: JKS (magic), PEM (a BEGIN line), PKCS12 (DER)."""
    if is_jks(data):
        return "JKS"
    if b"-----BEGIN " in data[:4096]:
        return "PEM"
    if data[:1] == b"\x30":
        return "PKCS12"
    return None


def _check_type(data: bytes, kind: str) -> None:
    looks = sniff_type(data)
    if looks is not None and looks != kind:
        raise StoreError(f"is a {looks} store, not {kind}: set the matching type option")
    if looks is None:
        raise StoreError(f"is not a {kind} store")


def read_trust_store(data: bytes, kind: str, password: str | None) -> StoreContents:
    """The certificates to trust in a store of type ``kind``."""
    _check_type(data, kind)
    if kind == "PEM":
        return read_pem_trust(data)
    contents = read_jks(data, password) if kind == "JKS" else read_pkcs12(data, password)
    certificates = contents.certificates or tuple(
        key.chain_der[0] for key in contents.keys if key.chain_der
    )
    if not certificates:
        raise StoreError("holds no certificate to trust")
    return StoreContents(certificates)


def read_key_store(
    data: bytes, kind: str, password: str | None, key_password: str | None
) -> StoreContents:
    """The one private key (and its chain) of a store of type ``kind``."""
    _check_type(data, kind)
    if kind == "PEM":
        contents = read_pem_key(data)
    elif kind == "JKS":
        contents = read_jks(data, password, key_password)
    else:
        contents = read_pkcs12(data, password)
    if not contents.keys:
        raise StoreError("holds no private key (only certificates): it is a trust store?")
    if len(contents.keys) > 1:
        raise StoreError("holds more than one private key; keep only the client's")
    if not contents.keys[0].chain_der:
        raise StoreError("holds a private key without its certificate")
    return contents
