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
from typing import Any, Iterable, Mapping

from protocol.errors import ConfigError

__all__ = ["OptionMap", "warn_once", "check_names", "INT32_MAX", "INT64_MAX",
           "VERBATIM_OPTIONS"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: Options whose values are kept exactly as given (passwords, and the JAAS line holding one).
VERBATIM_OPTIONS = frozenset({"kafka.sasl.password", "kafka.ssl.key.password",
                              "kafka.sasl.jaas.config",
                              "kafka.sasl.oauthbearer.client.credentials.client.secret"})


class OptionMap:
    """The raw options by lower-case name, with typed getters that name the option.

    ``canonical`` maps the lower-case name of each known option to its documented spelling,
    used to name an option in errors.
    """

    def __init__(self, options: Mapping[str, Any], canonical: Mapping[str, str] = {}):
        self.raw: dict[str, str] = {}
        spelled: dict[str, str] = {}
        for key, value in dict(options).items():
            if not isinstance(key, str):
                raise ConfigError(f"option names must be strings, not {type(key).__name__}")
            lower = key.lower()
            if lower in spelled:
                raise ConfigError(f"option {canonical.get(lower, key)!r} is given twice "
                                  f"(as {spelled[lower]!r} and {key!r})")
            spelled[lower] = key
            if value is None:
                continue
            self.raw[lower] = value if isinstance(value, str) else str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name.lower())
        if value is None:
            return default
        return value if name.lower() in VERBATIM_OPTIONS else value.strip()

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value.lower() == "true"

    def integer(self, name: str, default: int | None = None, *, minimum: int = 1,
                maximum: int = INT64_MAX) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        if not re.fullmatch(r"[+-]?[0-9]+", value):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        number = int(value)
        if number < minimum:
            raise ConfigError(f"{name} must be positive" if minimum == 1 else
                              f"{name} must be at least {minimum}, got {number}")
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


def check_names(opts: OptionMap, canonical: Mapping[str, str], rejected: Mapping[str, str], *,
                log: logging.Logger, side: str, quiet: Iterable[str] = (),
                warn_unknown: bool = True) -> tuple[str, ...]:
    """Check the option names of one side (``side``: "source" or "writer").

    An option in ``rejected`` (lower-case name -> Spark's message) raises ``ConfigError``.
    Every other unknown ``kafka.*`` option is warned about once and returned, sorted: the
    client does not use it. An unknown option without the prefix is warned about when
    ``warn_unknown`` (or when it looks like a typo of a known one, with the hint);
    ``quiet`` names options of the other side or of Spark that pass silently.
    """
    for lower, message in rejected.items():
        if opts.has(lower):
            raise ConfigError(message)
    quiet = frozenset(name.lower() for name in quiet)
    ignored = []
    for lower in sorted(opts.raw):
        if lower in canonical or lower in quiet:
            continue
        if lower.startswith("kafka."):
            ignored.append(lower)
            warn_once(log, f"unknown:{lower}", "Kafka option '%s' is not used by the "
                      "pyspark-pykafka %s and is ignored.", lower, side)
            continue
        close = difflib.get_close_matches(lower, list(canonical), n=1, cutoff=0.8)
        if close or warn_unknown:
            hint = f" Did you mean '{canonical[close[0]]}'?" if close else ""
            warn_once(log, f"unknown:{lower}", "Option '%s' is not a pykafka %s option and "
                      "is ignored.%s", lower, side, hint)
    return tuple(ignored)
