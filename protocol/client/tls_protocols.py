"""``kafka.ssl.enabled.protocols``, ``kafka.ssl.protocol`` and ``kafka.ssl.cipher.suites``
with Java's names, on an ``ssl.SSLContext``.

Java names cipher suites as IANA does (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``), OpenSSL
its own way (``ECDHE-RSA-AES128-GCM-SHA256``): ``openssl_cipher`` maps the one to the other
for the suites of TLS 1.2 and older, and a suite OpenSSL does not offer is refused naming
it. TLS 1.3's suites have the same names on both sides; Python's ``ssl`` cannot narrow
them, so OpenSSL offers its TLS 1.3 suites whichever are listed.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence

from ..errors import ConfigError

__all__ = ["apply_protocols", "openssl_cipher", "parse_list"]

_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_KEY_EXCHANGES = {
    "ECDHE_ECDSA": "ECDHE-ECDSA-",
    "ECDHE_RSA": "ECDHE-RSA-",
    "DHE_RSA": "DHE-RSA-",
    "DHE_DSS": "DHE-DSS-",
    "RSA": "",
}
_CIPHER = re.compile(r"(AES|CAMELLIA|ARIA)_(128|256)_(GCM|CBC|CCM|CCM_8)_?(SHA\d*)?$")


def parse_list(text: str) -> tuple[str, ...]:
    """A Java list option (comma-separated) as its trimmed, non-empty items."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def openssl_cipher(name: str) -> str | None:
    """OpenSSL's name of the Java (IANA) suite ``name``; ``None`` when there is no rule
    for it. An OpenSSL name (with dashes) and a TLS 1.3 suite are returned as they are."""
    if "-" in name or not name.startswith(("TLS_", "SSL_")) or name in _TLS13_SUITES:
        return name
    exchange, sep, cipher = name[4:].partition("_WITH_")
    prefix = _KEY_EXCHANGES.get(exchange)
    if not sep or prefix is None:
        return None
    if cipher == "CHACHA20_POLY1305_SHA256":
        return prefix + "CHACHA20-POLY1305"
    match = _CIPHER.match(cipher)
    if not match:
        return None
    family, bits, mode, mac = match.groups()
    if mode == "CBC":
        return f"{prefix}{family}{bits}-{'SHA' if mac == 'SHA' else mac}"
    return f"{prefix}{family}{bits}-{mode.replace('_', '-')}" + (
        f"-{mac}" if mode == "GCM" and mac else ""
    )


def _version(option: str, name: str) -> ssl.TLSVersion:
    version = _VERSIONS.get(name.upper())
    if version is None:
        raise ConfigError(
            f"{option}: unsupported protocol {name!r}; use TLSv1.2 or TLSv1.3 "
            "(or TLSv1, TLSv1.1 where OpenSSL still allows them)"
        )
    return version


def apply_protocols(
    context: ssl.SSLContext,
    enabled: Sequence[str] | None,
    protocol: str | None,
    suites: Sequence[str] | None,
) -> None:
    """The TLS versions and cipher suites the options allow, on ``context``."""
    if enabled:
        versions = [_version("kafka.ssl.enabled.protocols", name) for name in enabled]
        context.minimum_version, context.maximum_version = min(versions), max(versions)
    if protocol and protocol.upper() not in ("TLS", "SSL"):
        # As Java's SSLContext.getInstance: a version caps what the context may use.
        cap = _version("kafka.ssl.protocol", protocol)
        if context.minimum_version > cap:
            raise ConfigError(
                f"kafka.ssl.protocol {protocol} is older than every protocol of "
                "kafka.ssl.enabled.protocols"
            )
        context.maximum_version = min(context.maximum_version, cap, key=_order)
    if suites:
        _apply_suites(context, suites)


def _order(version: ssl.TLSVersion) -> int:
    # MAXIMUM_SUPPORTED is a negative sentinel; it is above every real version.
    return 1 << 20 if version == ssl.TLSVersion.MAXIMUM_SUPPORTED else int(version)


def _apply_suites(context: ssl.SSLContext, suites: Sequence[str]) -> None:
    names = []
    for suite in suites:
        if suite.upper() in _TLS13_SUITES:
            continue
        name = openssl_cipher(suite)
        try:
            if name is None:
                raise ssl.SSLError
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)
        except ssl.SSLError:
            raise ConfigError(
                f"kafka.ssl.cipher.suites: the cipher suite {suite!r} is not one OpenSSL "
                f"offers here ({ssl.OPENSSL_VERSION})"
            ) from None
        names.append(name)
    if names:
        context.set_ciphers(":".join(names))
    elif _order(context.maximum_version) >= _order(ssl.TLSVersion.TLSv1_3):
        # Only TLS 1.3 suites listed: no TLS 1.2 suite is allowed, as in Java.
        context.minimum_version = ssl.TLSVersion.TLSv1_3
    else:
        raise ConfigError(
            "kafka.ssl.cipher.suites lists only TLS 1.3 suites, but TLS 1.3 is not enabled"
        )
