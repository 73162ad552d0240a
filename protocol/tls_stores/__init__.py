"""Key and trust stores as Kafka's Java client reads them, turned into what OpenSSL takes.

Sans-IO: each reader takes the bytes of a store (or PEM text) and its password and returns
``StoreContents``: the certificates to trust (DER) and, for a key store, one private key
(PKCS#8 DER or PEM) with its certificate chain. ``protocol.client.tls_stores`` reads the
files and builds the ``ssl.SSLContext`` from them.

- ``jks``: Java's JKS format, read here with ``hashlib`` alone.
- ``pkcs12``: PKCS#12 through the ``cryptography`` package (the ``pkcs12`` extra).
- ``pem``: PEM files and the inline PEM options (KIP-651).
"""

from __future__ import annotations

from .contents import PrivateKey, StoreContents, StoreError, WrongPasswordError

__all__ = ["PrivateKey", "StoreContents", "StoreError", "WrongPasswordError"]
