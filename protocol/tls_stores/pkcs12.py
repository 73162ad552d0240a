"""PKCS#12 stores, read through the ``cryptography`` package (the ``pkcs12`` extra).

Without the package a PKCS12 store fails at once, naming the extra and the pip command.
"""

from __future__ import annotations

import importlib
from typing import Any

from .contents import PrivateKey, StoreContents, StoreError, WrongPasswordError

__all__ = ["read_pkcs12", "MISSING_EXTRA"]

MISSING_EXTRA = (
    "needs the 'cryptography' package, which is not installed: "
    "pip install 'pyspark-pykafka[pkcs12]' (or pip install cryptography), or convert the "
    "store to JKS or PEM"
)


def _load(data: bytes, password: bytes | None) -> Any:
    try:
        pkcs12 = importlib.import_module("cryptography.hazmat.primitives.serialization.pkcs12")
    except ImportError:
        raise StoreError(MISSING_EXTRA) from None
    return pkcs12.load_pkcs12(data, password)


def read_pkcs12(data: bytes, password: str | None) -> StoreContents:
    """The certificates and the private key of a PKCS#12 store. The key's password is the
    store's (as Java's keytool and openssl make them)."""
    secret = password.encode("utf-8") if password is not None else None
    try:
        store = _load(data, secret)
    except StoreError:
        raise
    except ValueError:
        if secret is not None and _opens_without_password(data):
            raise WrongPasswordError("has no password, but one was given") from None
        raise WrongPasswordError(
            "cannot be opened with the password given: wrong password, or not a PKCS12 store"
        ) from None
    except Exception as exc:  # cryptography's errors for unsupported algorithms
        raise StoreError(f"cannot be read as PKCS12 ({type(exc).__name__})") from None
    from cryptography.hazmat.primitives import serialization

    others = tuple(
        c.certificate.public_bytes(serialization.Encoding.DER) for c in store.additional_certs
    )
    leaf = store.cert.certificate.public_bytes(serialization.Encoding.DER) if store.cert else None
    chain = ((leaf,) if leaf else ()) + others
    if store.key is None:
        return StoreContents(chain)
    key_pem = store.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return StoreContents((), (PrivateKey(key_pem, chain),))


def _opens_without_password(data: bytes) -> bool:
    try:
        _load(data, None)
    except Exception:
        return False
    return True
