"""The Java client's ``ssl.*`` store and protocol settings, as ``ClientConfig`` carries them.

Picklable (the driver sends it to the executors, which read the stores from the paths
given, as Spark's connector does); the passwords and an inline private key are
``Secret``: never in a repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Secret

__all__ = ["JavaSsl", "STORE_TYPES"]

#: The store types Kafka's Java client reads (``ssl.keystore.type``, ``ssl.truststore.type``).
STORE_TYPES = ("JKS", "PKCS12", "PEM")


@dataclass(frozen=True)
class JavaSsl:
    """``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``, ``kafka.ssl.enabled.protocols``,
    ``kafka.ssl.protocol`` and ``kafka.ssl.cipher.suites`` (the key's password stays
    ``ClientConfig.ssl_key_password``). Types are upper case; ``None``: not set."""

    truststore_location: str | None = None
    truststore_password: Secret | None = field(default=None, repr=False)
    truststore_type: str = "JKS"
    truststore_certificates: str | None = field(default=None, repr=False)  # long PEM
    keystore_location: str | None = None
    keystore_password: Secret | None = field(default=None, repr=False)
    keystore_type: str = "JKS"
    keystore_certificate_chain: str | None = field(default=None, repr=False)  # long PEM
    keystore_key: Secret | None = field(default=None, repr=False)
    enabled_protocols: tuple[str, ...] | None = None
    protocol: str | None = None
    cipher_suites: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("truststore_password", "keystore_password", "keystore_key"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Secret):
                object.__setattr__(self, name, Secret(value))

    @property
    def has_trust_store(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    @property
    def has_key_store(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)
