"""The options of a data source as Spark hands them over, read one at a time.

Spark passes a Python data source a case-insensitive mapping of strings. ``OptionMap`` keys
them by lower-case name (refusing one option given twice under two spellings), trims
values (but never a password: a password may start or end with a space) and offers typed
getters whose errors name the option. ``warn_once`` logs a warning about an option once per
process: options are parsed again for every query, a warning should not be.
"""

from __future__ import annotations

import difflib
import logging
import re
import threading
from typing import Any, overload
from collections.abc import Iterable, Mapping

from protocol.errors import ConfigError

from .kafka_client_configs import KAFKA_CLIENT_CONFIGS

__all__ = [
    "OptionMap",
    "warn_once",
    "check_names",
    "check_spelling",
    "INT32_MAX",
    "INT64_MAX",
    "SECRET_OPTIONS",
    "TYPO_CUTOFF",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: The options whose values are secrets, the reader's and the writer's alike: passwords,
#: the JAAS line holding one, the OAUTHBEARER client secret, the Schema Registry's
#: credentials. Kept exactly as given (a password may start or end with a space) and never
#: quoted; the registry client also keeps its secrets out of what a registry answers.
SECRET_OPTIONS = frozenset(
    {
        "kafka.sasl.password",
        "kafka.ssl.key.password",
        "kafka.ssl.keystore.password",
        "kafka.ssl.keystore.key",
        "kafka.ssl.truststore.password",
        "kafka.sasl.jaas.config",
        "kafka.sasl.oauthbearer.client.credentials.client.secret",
        "schema.registry.basic.auth.user.info",
        "schema.registry.bearer.auth.token",
        "schema.registry.ssl.key.password",
    }
)


class OptionMap:
    """The raw options by lower-case name, with typed getters that name the option.

    ``canonical`` maps the lower-case name of each known option to its documented spelling,
    used to name an option in errors.
    """

    def __init__(self, options: Mapping[str, Any], canonical: Mapping[str, str] = {}):
        self.raw: dict[str, str] = {}
        spelled: dict[str, str] = {}
        #: lower-case name -> the name as the user typed it (for errors about the name)
        self.spelled = spelled
        for key, value in dict(options).items():
            if not isinstance(key, str):
                raise ConfigError(f"option names must be strings, not {type(key).__name__}")
            lower = key.lower()
            if lower in spelled:
                raise ConfigError(
                    f"option {canonical.get(lower, key)!r} is given twice "
                    f"(as {spelled[lower]!r} and {key!r})"
                )
            spelled[lower] = key
            if value is None:
                continue
            self.raw[lower] = value if isinstance(value, str) else str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    @overload
    def get(self, name: str, default: str | None) -> str | None: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name.lower())
        if value is None:
            return default
        return value if name.lower() in SECRET_OPTIONS else value.strip()

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value.lower() == "true"

    @overload
    def integer(
        self, name: str, default: int, *, minimum: int = 1, maximum: int = INT64_MAX
    ) -> int: ...
    @overload
    def integer(
        self, name: str, default: int | None = None, *, minimum: int = 1, maximum: int = INT64_MAX
    ) -> int | None: ...

    def integer(
        self, name: str, default: int | None = None, *, minimum: int = 1, maximum: int = INT64_MAX
    ) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        if not re.fullmatch(r"[+-]?[0-9]+", value):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        number = int(value)
        if number < minimum:
            raise ConfigError(
                f"{name} must be positive"
                if minimum == 1
                else f"{name} must be at least {minimum}, got {number}"
            )
        if number > maximum:
            raise ConfigError(f"{name} must be at most {maximum}, got {number}")
        return number


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(logger: logging.Logger, key: str, message: str, *args: Any) -> None:
    """Log ``message`` on ``logger`` the first time ``key`` is seen for it in this process."""
    with _warned_lock:
        if f"{logger.name}:{key}" in _warned:
            return
        _warned.add(f"{logger.name}:{key}")
    logger.warning(message, *args)


#: How close (difflib's ratio) an unknown option name must be to a known one to be taken
#: for a misspelling of it: ``startingOffset``, ``kafka.isolation.levle`` and
#: ``kafka.bootstrap.server`` are; Confluent's ``schema.registry.ssl.truststore.location``
#: (0.8 from ``schema.registry.ssl.key.location``) is not.
TYPO_CUTOFF = 0.85


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether one letter typed wrong, left out, added or swapped with the next turns
    ``a`` into ``b`` (``topik``/``topic``: difflib's ratio is only 0.8 for short names)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return (
        a[i + 1 :] == b[i + 1 :]
        or a[i + 1 :] == b[i:]
        or a[i:] == b[i + 1 :]
        or (a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :])
    )


def _misspelling_of(lower: str, known: Mapping[str, str]) -> str | None:
    """The documented spelling of the known option ``lower`` is a misspelling of, if any."""
    close = difflib.get_close_matches(lower, list(known), n=1, cutoff=TYPO_CUTOFF)
    if not close and len(lower) >= 4:
        close = [name for name in known if _one_edit_apart(lower, name)][:1]
    return known[close[0]] if close else None


def _meant(lower: str, known: Mapping[str, str]) -> str | None:
    """What the unknown option ``lower`` is a misspelling of, if anything: never for one of
    Kafka's own client options."""
    if lower.startswith("kafka.") and lower[len("kafka.") :] in KAFKA_CLIENT_CONFIGS:
        return None
    return _misspelling_of(lower, known)


def check_spelling(
    opts: OptionMap,
    canonical: Mapping[str, str],
    rejected: Mapping[str, str],
    *,
    side: str,
    quiet: Iterable[str] = (),
) -> None:
    """Raise ``ConfigError`` at the first unknown option close to a known one (a
    misspelling, ``TYPO_CUTOFF``), naming what was typed and what was meant. Run before any
    other check: a mistyped ``subscribe`` is reported as such, not as a missing one."""
    quiet_names = {name.lower(): name for name in quiet}  # named as documented
    known = {**quiet_names, **{name: name for name in rejected}, **canonical}
    for lower in sorted(opts.raw):
        if lower in canonical or lower in quiet_names:
            continue
        meant = _meant(lower, known)
        if meant is not None:
            kind = "Kafka option" if lower.startswith("kafka.") else "Option"
            raise ConfigError(
                f"{kind} '{opts.spelled.get(lower, lower)}' is not an option of the "
                f"pyspark-pykafka {side}. Did you mean '{meant}'?"
            )


def check_names(
    opts: OptionMap,
    canonical: Mapping[str, str],
    rejected: Mapping[str, str],
    *,
    log: logging.Logger,
    side: str,
    quiet: Iterable[str] = (),
    warn_unknown: bool = True,
) -> tuple[str, ...]:
    """Check the option names of one side (``side``: "source" or "writer").

    An option in ``rejected`` (lower-case name -> Spark's message) raises ``ConfigError``.
    An unknown option close to a known one (``TYPO_CUTOFF``) is a misspelling: it raises
    ``ConfigError`` naming what was typed and what was meant, before anything is read, since
    ignoring it would silently change what the query does. Every other unknown ``kafka.*``
    option is warned about once and returned, sorted: Kafka's own client options
    (``KAFKA_CLIENT_CONFIGS``, what Spark's JVM connector passes on) are never taken for
    misspellings. Any other unknown option is warned about when ``warn_unknown``;
    ``quiet`` names options of the other side or of Spark that pass silently.
    """
    for lower, message in rejected.items():
        if opts.has(lower):
            raise ConfigError(message)
    check_spelling(opts, canonical, rejected, side=side, quiet=quiet)
    quiet = frozenset(name.lower() for name in quiet)
    ignored = []
    for lower in sorted(opts.raw):
        if lower in canonical or lower in quiet:
            continue
        typed = opts.spelled.get(lower, lower)
        is_kafka = lower.startswith("kafka.")
        if is_kafka:
            ignored.append(lower)
            warn_once(
                log,
                f"unknown:{lower}",
                "Kafka option '%s' is not used by the pyspark-pykafka %s and is ignored.",
                typed,
                side,
            )
            continue
        if warn_unknown:
            warn_once(
                log,
                f"unknown:{lower}",
                "Option '%s' is not a pykafka %s option and is ignored.",
                typed,
                side,
            )
    return tuple(ignored)
