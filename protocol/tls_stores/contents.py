"""What a store holds, as the TLS context needs it, and the errors of reading one."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = ["PrivateKey", "StoreContents", "StoreError", "WrongPasswordError"]


class StoreError(ConfigError):
    """A store cannot be read: not of its type, truncated, tampered with, or holding
    something we cannot use. The message never holds a password; the caller prefixes the
    option it came from."""


class WrongPasswordError(StoreError):
    """The store's integrity check, or its key's, fails with the password given."""


@dataclass(frozen=True)
class PrivateKey:
    """A private key and its certificate chain (the leaf first), all ready for OpenSSL:
    ``key_pem`` is PEM (unencrypted PKCS#8, or as given with ``encrypted`` when a PEM
    store's key is encrypted and OpenSSL decrypts it with ``kafka.ssl.key.password``)."""

    key_pem: bytes = field(repr=False)
    chain_der: tuple[bytes, ...]
    encrypted: bool = False


@dataclass(frozen=True)
class StoreContents:
    """The trusted certificates (DER) and the private keys of one store."""

    certificates: tuple[bytes, ...] = ()
    keys: tuple[PrivateKey, ...] = ()
