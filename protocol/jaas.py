"""The JVM's ``sasl.jaas.config`` string, read as Kafka's Java client reads it.

- ``parse_jaas_options``: the login module and its options.
- ``parse_jaas_config``: the username, password and login module of PLAIN and SCRAM.
- ``canonical_class``: a Java class name without the ``kafkashaded.`` prefix.

Errors are ``ConfigError`` and never quote the input: it may hold a password.
"""

from __future__ import annotations

import re

from .errors import ConfigError

_JAAS_OPTION = "kafka.sasl.jaas.config"
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_MODULE_RE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*", re.ASCII)
_JAAS_WORD_RE = re.compile(r"[^\s=;\"']+")
_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class _JaasReader:
    """A cursor over a JAAS string. Error messages give positions, never the text, so a
    password can never leak into them."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{_JAAS_OPTION}: {message} (at character {self.pos})")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos : self.pos + 1]

    def word(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip_space()
        match = pattern.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected {what}")
        self.pos = match.end()
        return match.group()

    def quoted(self) -> str:
        """A value in double or single quotes (Java's JaasConfig takes both); a backslash
        escapes the next character."""
        start, self.pos = self.pos, self.pos + 1
        quote = self.text[start]
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == quote:
                self.pos += 1
                return "".join(out)
            if ch == "\\" and self.pos + 1 < len(self.text):
                self.pos += 1
                ch = _JAAS_ESCAPES.get(self.text[self.pos], self.text[self.pos])
            out.append(ch)
            self.pos += 1
        self.pos = start
        raise self.error("unterminated quoted value")


def canonical_class(name: str | None) -> str | None:
    """A Java class name of a JAAS or callback option, without the ``kafkashaded.`` prefix
    Databricks' shaded Kafka client gives it (the same class either way)."""
    if name is None:
        return None
    return name.strip().removeprefix("kafkashaded.")


def parse_jaas_options(text: str) -> tuple[str, dict[str, str]]:
    """Read ``(login_module, options)`` from a JVM ``sasl.jaas.config`` value.

    The syntax is ``<LoginModule class> <flag> name="value" ... ;`` with exactly one login
    module, a flag among required/requisite/sufficient/optional, and values either
    double-quoted (a backslash escapes the next character, e.g. ``\\"``) or bare words.
    Errors are ``ConfigError`` and never quote the input (it may hold secrets).
    """
    if not isinstance(text, str):
        raise ConfigError(f"{_JAAS_OPTION} must be a string, not {type(text).__name__}")
    reader = _JaasReader(text)
    if not reader.peek():
        raise reader.error("the value is empty")
    module = reader.word(_JAAS_MODULE_RE, "a login module class name")
    flag = reader.word(_JAAS_WORD_RE, "a control flag").lower() if reader.peek() else ""
    if flag not in _JAAS_FLAGS:
        raise reader.error(
            f"expected a control flag ({', '.join(_JAAS_FLAGS)}) after the login module class name"
        )
    options: dict[str, str] = {}
    while reader.peek() not in (";", ""):
        name = reader.word(re.compile(r"[A-Za-z_][\w.\-]*", re.ASCII), "an option name")
        if reader.peek() != "=":
            raise reader.error("expected '=' after an option name")
        reader.pos += 1
        value = (
            reader.quoted()
            if reader.peek() in ('"', "'")
            else reader.word(_JAAS_WORD_RE, "an option value")
        )
        if name in options:
            raise reader.error("an option is given twice")
        options[name] = value
    if reader.peek() != ";":
        raise reader.error("expected ';' after the options")
    reader.pos += 1
    if reader.peek():
        raise reader.error("unexpected text after ';' (exactly one login module is allowed)")
    return module, options


def parse_jaas_config(text: str) -> tuple[str, str, str]:
    """Read ``(username, password, login_module)`` from a JVM ``sasl.jaas.config`` value
    (syntax: see ``parse_jaas_options``). Options other than ``username`` and ``password``
    are accepted and ignored. The caller decides whether the login module suits its
    mechanism (see ``sasl.PLAIN_LOGIN_MODULE`` and ``sasl.SCRAM_LOGIN_MODULE``). Errors are
    ``ConfigError`` and never quote the input.
    """
    module, options = parse_jaas_options(text)
    for required in ("username", "password"):
        if not options.get(required):
            raise ConfigError(f"{_JAAS_OPTION}: the {required} option is missing or empty")
    return options["username"], options["password"], module
