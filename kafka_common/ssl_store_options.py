"""Java key and trust stores and the Java client's TLS protocol options, as Kafka's Java
client reads them: ``STORE_OPTIONS`` documents them (rows of ``SECURITY_OPTIONS``),
``java_ssl(opts)`` checks them together, with Kafka's rules, and returns the
``protocol.tls_stores.options.JavaSsl`` that ``ClientConfig.ssl_java`` carries. The
stores themselves are read where the connection is made (``protocol.client.tls_stores``).
"""

from __future__ import annotations

from typing import Any

from protocol.client.tls_protocols import openssl_cipher, parse_list
from protocol.errors import ConfigError
from protocol.tls_stores.options import STORE_TYPES, JavaSsl

from .option_map import OptionMap

__all__ = ["STORE_OPTIONS", "STORE_OPTION_NAMES", "java_ssl"]

_TYPES = ", ".join(STORE_TYPES)

#: (name, default, meaning) of each option, for the reader's and the writer's tables.
STORE_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "kafka.ssl.truststore.location",
        "none",
        "Trust store of the CAs to trust (instead of the system's), read on each executor "
        "from this path (ship it with spark-submit --files).",
    ),
    ("kafka.ssl.truststore.password", "none", "Password of the trust store; never logged."),
    ("kafka.ssl.truststore.type", '"JKS"', f"Type of the trust store: {_TYPES}."),
    (
        "kafka.ssl.truststore.certificates",
        "none",
        "The CAs to trust as inline PEM (kafka.ssl.truststore.type PEM).",
    ),
    (
        "kafka.ssl.keystore.location",
        "none",
        "Key store of the client certificate and its key for mutual TLS, read on each "
        "executor from this path.",
    ),
    ("kafka.ssl.keystore.password", "none", "Password of the key store; never logged."),
    ("kafka.ssl.keystore.type", '"JKS"', f"Type of the key store: {_TYPES}."),
    (
        "kafka.ssl.keystore.certificate.chain",
        "none",
        "The client certificate chain as inline PEM (kafka.ssl.keystore.type PEM).",
    ),
    (
        "kafka.ssl.keystore.key",
        "none",
        "The client's PKCS#8 private key as inline PEM (kafka.ssl.keystore.type PEM); "
        "never logged.",
    ),
    (
        "kafka.ssl.enabled.protocols",
        '"TLSv1.2,TLSv1.3"',
        "TLS versions the client may use (TLSv1.2, TLSv1.3).",
    ),
    (
        "kafka.ssl.protocol",
        '"TLSv1.3"',
        "The newest TLS version the client may use (TLS: any enabled one).",
    ),
    (
        "kafka.ssl.cipher.suites",
        "OpenSSL's",
        "Cipher suites the client offers, in Java's (IANA) names or OpenSSL's.",
    ),
)

STORE_OPTION_NAMES = tuple(name for name, _, _ in STORE_OPTIONS)


def _store_type(opts: OptionMap, option: str) -> str:
    kind = (opts.get(option) or "JKS").upper()
    if kind not in STORE_TYPES:
        raise ConfigError(f"{option}: unsupported store type {kind!r}; use one of {_TYPES}")
    return kind


def _trust_store(opts: OptionMap) -> dict[str, Any]:
    location = opts.get("kafka.ssl.truststore.location") or None
    certificates = opts.get("kafka.ssl.truststore.certificates") or None
    password = opts.get("kafka.ssl.truststore.password")
    kind = _store_type(opts, "kafka.ssl.truststore.type")
    if location and certificates:
        raise ConfigError(
            "kafka.ssl.truststore.location and kafka.ssl.truststore.certificates are both "
            "set: give one"
        )
    if password is not None and not location:
        raise ConfigError(
            "kafka.ssl.truststore.password is set without kafka.ssl.truststore.location"
        )
    if certificates and kind != "PEM":
        raise ConfigError(
            "kafka.ssl.truststore.certificates (inline PEM) needs kafka.ssl.truststore.type "
            f"PEM, not {kind}"
        )
    if location and kind == "PEM" and password is not None:
        raise ConfigError("kafka.ssl.truststore.password cannot be set for a PEM trust store")
    if location and opts.has("kafka.ssl.cafile"):
        raise ConfigError("kafka.ssl.cafile and kafka.ssl.truststore.location: give one")
    return dict(
        truststore_location=location,
        truststore_password=password,
        truststore_type=kind,
        truststore_certificates=certificates,
    )


def _key_store(opts: OptionMap) -> dict[str, Any]:
    location = opts.get("kafka.ssl.keystore.location") or None
    chain = opts.get("kafka.ssl.keystore.certificate.chain") or None
    key = opts.get("kafka.ssl.keystore.key") or None
    password = opts.get("kafka.ssl.keystore.password")
    kind = _store_type(opts, "kafka.ssl.keystore.type")
    if (chain is None) != (key is None):
        raise ConfigError(
            "kafka.ssl.keystore.certificate.chain and kafka.ssl.keystore.key go together: "
            "set both or neither"
        )
    if key and location:
        raise ConfigError(
            "kafka.ssl.keystore.location and kafka.ssl.keystore.key are both set: give one"
        )
    if key and kind != "PEM":
        raise ConfigError(
            f"kafka.ssl.keystore.key (inline PEM) needs kafka.ssl.keystore.type PEM, not {kind}"
        )
    if password is not None and not location:
        raise ConfigError("kafka.ssl.keystore.password is set without kafka.ssl.keystore.location")
    if location and kind == "PEM" and password is not None:
        raise ConfigError(
            "kafka.ssl.keystore.password cannot be set for a PEM key store: an encrypted "
            "key's password is kafka.ssl.key.password"
        )
    if location and kind != "PEM" and password is None:
        raise ConfigError(
            f"kafka.ssl.keystore.location is set ({kind}) without kafka.ssl.keystore.password"
        )
    if (location or key) and opts.has("kafka.ssl.certfile"):
        raise ConfigError("kafka.ssl.certfile and a kafka.ssl.keystore.* store: give one")
    return dict(
        keystore_location=location,
        keystore_password=password,
        keystore_type=kind,
        keystore_certificate_chain=chain,
        keystore_key=key,
    )


def _protocols(opts: OptionMap) -> dict[str, Any]:
    enabled = opts.get("kafka.ssl.enabled.protocols")
    suites = opts.get("kafka.ssl.cipher.suites")
    cipher_suites = parse_list(suites) if suites else None
    for suite in cipher_suites or ():
        if openssl_cipher(suite) is None:
            raise ConfigError(
                f"kafka.ssl.cipher.suites: no OpenSSL cipher suite is known for {suite!r}"
            )
    return dict(
        enabled_protocols=parse_list(enabled) if enabled else None,
        protocol=opts.get("kafka.ssl.protocol") or None,
        cipher_suites=cipher_suites,
    )


def java_ssl(opts: OptionMap) -> JavaSsl | None:
    """The Java client's store and protocol options, checked; ``None`` when none is set."""
    if not any(opts.has(name) for name in STORE_OPTION_NAMES):
        return None
    java = JavaSsl(**_trust_store(opts), **_key_store(opts), **_protocols(opts))
    # The context is built here once, driver-side, so that a bad protocol or suite name
    # fails the query at once rather than in every task.
    import ssl

    from protocol.client.tls_protocols import apply_protocols

    apply_protocols(
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
        java.enabled_protocols,
        java.protocol,
        java.cipher_suites,
    )
    return java
