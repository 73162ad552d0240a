"""The exceptions of the project, in three families.

- ``ProtocolError``: the peer sent bytes we cannot accept (malformed, truncated, too large,
  a bad CRC). Raised by every decoder; never an IndexError or a MemoryError.
- ``BrokerError``: the broker answered with a Kafka error code. One subclass per code in
  the guide's table (``OffsetOutOfRange``, ``NotLeaderOrFollower``, ...), each knowing
  whether it is retriable, and carrying the topic and partition it concerns.
- ``ConfigError``: the caller misused the API or gave a bad option.

``KafkaConnectionError`` and ``KafkaTimeoutError`` cover the network.
"""

from __future__ import annotations

from typing import Any

from .error_codes import ERROR_CODES


class PyKafkaError(Exception):
    """Root of every exception raised by pyspark-pykafka."""


class ProtocolError(PyKafkaError):
    """The peer sent data that does not follow the Kafka protocol."""


class CorruptRecordError(ProtocolError):
    """A record batch failed a check (CRC, length, count). Names where it was found."""

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ):
        where = []
        if topic is not None:
            where.append(f"topic {topic!r}")
        if partition is not None:
            where.append(f"partition {partition}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.topic, self.partition, self.offset = topic, partition, offset


class ConfigError(PyKafkaError, ValueError):
    """The caller gave a bad option or used the API wrongly."""


class MissingCodecError(PyKafkaError, ImportError):
    """A compression codec's library is not installed."""


class KafkaConnectionError(PyKafkaError, ConnectionError):
    """A broker could not be reached, or the connection broke."""


class KafkaTimeoutError(PyKafkaError, TimeoutError):
    """An operation did not complete within its deadline."""


class AuthenticationError(PyKafkaError):
    """SASL or TLS authentication failed (the message never holds a password)."""


class UnsupportedVersionError(PyKafkaError):
    """The broker and this client share no version of an API."""


def unreadable_file(option: str, name: str, exc: OSError, hint: str = "") -> ConfigError:
    """The error for the file ``name`` that ``option`` gives and ``open`` failed on."""
    if isinstance(exc, FileNotFoundError):
        return ConfigError(f"{option}: no such file {name!r}{hint}")
    if isinstance(exc, IsADirectoryError):
        return ConfigError(f"{option}: {name!r} is a directory, not a file")
    if isinstance(exc, PermissionError):
        return ConfigError(f"{option}: cannot read {name!r} (permission denied)")
    return ConfigError(f"{option}: cannot read {name!r} ({exc.strerror or type(exc).__name__})")


class BrokerError(PyKafkaError):
    """An error code answered by a broker. ``BrokerError.for_code`` picks the subclass."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    description: str = ""
    #: For an authorization failure: its ``protocol.authorization.Authorization``.
    authorization: Any = None  # (not imported here: authorization.py imports this module)

    def __init__(
        self, message: str | None = None, *, topic: str | None = None, partition: int | None = None
    ):
        self.topic, self.partition = topic, partition
        text = f"[{self.name} ({self.code})] {message or self.description}"
        if topic is not None:
            text += f" (topic {topic!r}" + (
                f", partition {partition})" if partition is not None else ")"
            )
        super().__init__(text)

    @staticmethod
    def for_code(
        code: int,
        message: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
    ) -> BrokerError:
        cls = _BY_CODE.get(code)
        if cls is None:
            description = "An error code this client does not know."
            cls = _error_class(code, f"UNKNOWN_ERROR_{code}", False, description)
        return cls(message, topic=topic, partition=partition)


def _error_class(code: int, name: str, retriable: bool, description: str) -> type[BrokerError]:
    """The subclass for one error code, named after it (``NotLeaderOrFollower``)."""
    attrs = {"code": code, "name": name, "retriable": retriable, "description": description}
    class_name = "".join(part.capitalize() for part in name.split("_"))
    return type(class_name, (BrokerError,), {**attrs, "__module__": __name__})


_BY_CODE: dict[int, type[BrokerError]] = {}
for _code, (_name, _retriable, _message) in ERROR_CODES.items():
    if _code == 0:
        continue
    _cls = _error_class(_code, _name, _retriable, _message)
    _BY_CODE[_code] = _cls
    globals()[_cls.__name__] = _cls


def error_class(name: str) -> type[BrokerError]:
    """The subclass for an error name, e.g. ``error_class("NOT_LEADER_OR_FOLLOWER")``."""
    for cls in _BY_CODE.values():
        if cls.name == name:
            return cls
    raise KeyError(name)
