"""A Confluent Schema Registry client without Spark, and Confluent's wire framing.

- ``settings``: the ``schema.registry.*`` options (URLs, auth, TLS, timeout), checked;
- ``client``: ``RegistryClient``, the REST calls the reader and writer make (schemas by id,
  subject versions, registration and lookup), retried within the timeout;
- ``framing``: Confluent's wire format (magic byte 0 + 4-byte id, Protobuf message indexes,
  magic byte 1 + GUID, ids in headers), parsed column-wise from an Arrow binary column and
  written row-wise for the sink.
"""

from .client import SCHEMA_TYPE, RegisteredSchema, RegistryAuthError, RegistryClient, RegistryError
from .settings import (
    REGISTRY_OPTIONS,
    SCHEMA_OPTION_SUFFIXES,
    RegistrySettings,
    check_binary_column,
    registry_settings,
)

__all__ = [
    "RegisteredSchema",
    "RegistryClient",
    "RegistryError",
    "RegistryAuthError",
    "SCHEMA_TYPE",
    "REGISTRY_OPTIONS",
    "RegistrySettings",
    "registry_settings",
    "SCHEMA_OPTION_SUFFIXES",
    "check_binary_column",
]
