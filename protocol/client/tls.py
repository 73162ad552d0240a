"""The client-side TLS context for broker connections.

``build_ssl_context`` starts from ``ssl.create_default_context()`` (TLS 1.2 or newer,
certificate verification and hostname checking on) and only ever relaxes it on explicit
request. Every problem with a file is a ``ConfigError`` naming the option and the path;
the key password never appears in a message.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, NoReturn, Union

from ..errors import ConfigError, unreadable_file

if TYPE_CHECKING:
    from ..tls_stores.options import JavaSsl

__all__ = ["build_ssl_context"]

StrPath = Union[str, "os.PathLike[str]"]

_PREFIX = "kafka.ssl."


def _readable_path(option: str, path: object) -> str:
    """The path as a string, after checking the file exists and can be read."""
    try:
        name = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise ConfigError(
            f"{_PREFIX}{option} must be a file path, not {type(path).__name__}"
        ) from None
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not name:
        raise ConfigError(f"{_PREFIX}{option}: the path is empty")
    try:
        with open(name, "rb"):
            pass
    except OSError as exc:
        raise unreadable_file(_PREFIX + option, name, exc) from None
    return name


def _reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc)


def _no_key_password() -> NoReturn:
    """Password callback used when none was given: OpenSSL would otherwise prompt on the
    terminal for an encrypted key and block the executor."""
    raise ConfigError(f"{_PREFIX}keyfile: the private key is encrypted; set {_PREFIX}key.password")


def _trusting_context(cafile: StrPath | None, java: JavaSsl | None) -> ssl.SSLContext:
    """A client context trusting the trust store, ``cafile`` or else the system's CAs."""
    if java is not None and java.has_trust_store:
        from .tls_stores import trust_context

        return trust_context(java)
    ca_path = _readable_path("cafile", cafile) if cafile is not None else None
    try:
        return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_path)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{_PREFIX}cafile: {ca_path!r} holds no usable PEM certificate ({_reason(exc)})"
        ) from None


def build_ssl_context(
    *,
    cafile: StrPath | None = None,
    certfile: StrPath | None = None,
    keyfile: StrPath | None = None,
    key_password: str | bytes | None = None,
    check_hostname: bool = True,
    verify: bool = True,
    java: JavaSsl | None = None,
) -> ssl.SSLContext:
    """A client ``SSLContext`` for connecting to brokers.

    - ``cafile``: PEM bundle of the CAs to trust *instead of* the system store (which is
      used when it is ``None``).
    - ``certfile`` / ``keyfile`` / ``key_password``: the client certificate for mutual TLS;
      ``keyfile`` may be omitted when ``certfile`` holds the key too. An encrypted key
      without ``key_password`` is an error, never a terminal prompt.
    - ``check_hostname=False``: skip the hostname check but keep verifying the chain.
    - ``verify=False``: accept any server certificate (and so skip the hostname check
      too). This is the only way to turn verification off.
    - ``java``: Java key and trust stores and protocol options
      (``protocol.client.tls_stores``), in place of ``cafile`` and ``certfile``.

    Both flags must be real booleans, so that a string such as ``"false"`` coming from an
    option map cannot silently mean ``True``.
    """
    for option, flag in (("check_hostname", check_hostname), ("verify", verify)):
        if not isinstance(flag, bool):
            raise ConfigError(f"{_PREFIX}{option} must be True or False, not {type(flag).__name__}")
    if certfile is None:
        key_store = java is not None and java.has_key_store
        for option, value in (("keyfile", keyfile), ("key_password", key_password)):
            if value is not None and not (key_store and option == "key_password"):
                raise ConfigError(f"{_PREFIX}{option} is set without {_PREFIX}certfile")
    if key_password is not None and not isinstance(key_password, (str, bytes, bytearray)):
        raise ConfigError(
            f"{_PREFIX}key.password must be str or bytes, not {type(key_password).__name__}"
        )

    context = _trusting_context(cafile, java)

    if certfile is not None:
        cert_path = _readable_path("certfile", certfile)
        key_path = _readable_path("keyfile", keyfile) if keyfile is not None else None
        password = key_password if key_password is not None else _no_key_password
        try:
            context.load_cert_chain(cert_path, key_path, password)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"{_PREFIX}certfile/{_PREFIX}keyfile: cannot load the client certificate "
                f"{cert_path!r} with the key {key_path or cert_path!r} ({_reason(exc)}); "
                f"check that both are PEM, that they match, and {_PREFIX}key.password"
            ) from None
        except ConfigError:
            raise  # from _no_key_password (ConfigError is also a ValueError)
        except ValueError:
            # OpenSSL limits the password length; say so without quoting it.
            raise ConfigError(f"{_PREFIX}key.password is too long") from None

    if java is not None:
        from .tls_stores import apply_java_ssl

        if isinstance(key_password, (bytes, bytearray)):
            key_password = bytes(key_password).decode("utf-8")
        apply_java_ssl(context, java, key_password)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not check_hostname:
        context.check_hostname = False  # verify_mode stays CERT_REQUIRED
    return context
