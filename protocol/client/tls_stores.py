"""Java key and trust stores (``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``) and the
Java client's protocol and cipher options, applied to an ``ssl.SSLContext``.

The stores are read where the connection is made (on each executor, from the path it is
given, as Spark's connector reads them: ship them with ``spark-submit --files``). Every
problem is a ``ConfigError`` naming the option, never a password. The client's private
key reaches OpenSSL through an anonymous in-memory file (``memfd_create``) where the
system has one, otherwise through a file readable by the owner alone in a private
directory, removed as soon as ``load_cert_chain`` returns.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator

from ..errors import ConfigError, unreadable_file
from ..tls_stores import PrivateKey, StoreError
from ..tls_stores.options import JavaSsl
from ..tls_stores.stores import read_key_store, read_trust_store
from .tls_protocols import apply_protocols

__all__ = ["trust_context", "load_key_store", "apply_java_ssl"]

_MAX_STORE_BYTES = 16 * 1024 * 1024


def _read(option: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_STORE_BYTES + 1)
    except OSError as exc:
        hint = (
            " (stores are read on each executor from this path: ship them with spark-submit "
            "--files, or give a path every node has)"
        )
        raise unreadable_file(option, path, exc, hint) from None
    if len(data) > _MAX_STORE_BYTES:
        raise ConfigError(f"{option}: {path!r} is larger than 16 MB, not a store")
    return data


def _password(value: object) -> str | None:
    reveal = getattr(value, "reveal", None)
    return reveal() if reveal else None


def trust_context(java: JavaSsl) -> ssl.SSLContext:
    """A client context trusting the certificates of the trust store alone."""
    if java.truststore_certificates is not None:
        option = "kafka.ssl.truststore.certificates"
        data, kind = java.truststore_certificates.encode("utf-8"), "PEM"
    else:
        option = "kafka.ssl.truststore.location"
        assert java.truststore_location is not None
        data, kind = _read(option, java.truststore_location), java.truststore_type
    try:
        certificates = read_trust_store(
            data, kind, _password(java.truststore_password)
        ).certificates
    except StoreError as exc:
        raise type(exc)(f"{option}: the {kind} trust store {exc}") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cadata=b"".join(certificates))
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{option}: a certificate of the trust store is not valid X.509 ({exc.reason})"
        ) from None
    return context


def _key_store_key(java: JavaSsl, key_password: str | None) -> tuple[str, PrivateKey]:
    if java.keystore_key is not None:
        option = "kafka.ssl.keystore.key"
        chain = (java.keystore_certificate_chain or "").encode("utf-8")
        data = chain + b"\n" + java.keystore_key.reveal().encode("utf-8")
        kind, password = "PEM", None
    else:
        option = "kafka.ssl.keystore.location"
        assert java.keystore_location is not None
        data, kind = _read(option, java.keystore_location), java.keystore_type
        password = _password(java.keystore_password)
    try:
        contents = read_key_store(data, kind, password, key_password)
    except StoreError as exc:
        raise type(exc)(f"{option}: the {kind} key store {exc}") from None
    return option, contents.keys[0]


def load_key_store(context: ssl.SSLContext, java: JavaSsl, key_password: str | None) -> None:
    """The client certificate and key of the key store, loaded into ``context``."""
    option, key = _key_store_key(java, key_password)
    chain = b"".join(ssl.DER_cert_to_PEM_cert(der).encode("ascii") for der in key.chain_der)
    if key.encrypted and key_password is None:
        raise ConfigError(f"{option}: the private key is encrypted; set kafka.ssl.key.password")

    def no_password() -> bytes:
        raise ConfigError(f"{option}: the private key is encrypted; set kafka.ssl.key.password")

    password = key_password if key.encrypted and key_password is not None else no_password
    with _private_file(key.key_pem + chain) as path:
        try:
            context.load_cert_chain(path, None, password)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"{option}: cannot load the client certificate and key ({exc.reason}): "
                "check that the certificate is the key's"
                + (" and kafka.ssl.key.password" if key.encrypted else "")
            ) from None
        except ConfigError:
            raise  # from no_password (ConfigError is also a ValueError)
        except ValueError:  # OpenSSL limits the password length; never quote it
            raise ConfigError("kafka.ssl.key.password is too long") from None


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path to ``data`` that no other user can read, gone when the block ends."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("pykafka-key", getattr(os, "MFD_CLOEXEC", 0))
        try:
            with open(fd, "wb", closefd=False) as f:
                f.write(data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="pykafka-key-")  # mode 0700
    try:
        path = os.path.join(directory, "key.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def apply_java_ssl(context: ssl.SSLContext, java: JavaSsl, key_password: str | None) -> None:
    """The key store, the protocols and the cipher suites of ``java`` on ``context``."""
    if java.has_key_store:
        load_key_store(context, java, key_password)
    apply_protocols(context, java.enabled_protocols, java.protocol, java.cipher_suites)
