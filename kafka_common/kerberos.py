"""Kerberos sign-in (``kafka.sasl.mechanism=GSSAPI``), as Spark's Kafka connector takes it.

The options of a job written for Spark's JVM connector::

    kafka.security.protocol=SASL_PLAINTEXT (or SASL_SSL)
    kafka.sasl.mechanism=GSSAPI
    kafka.sasl.kerberos.service.name=kafka          (the default)
    kafka.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required
        useKeyTab=true keyTab="/etc/security/app.keytab" principal="app@EXAMPLE.COM";
    (or: ... Krb5LoginModule required useTicketCache=true;)

become ``KerberosFactory``, the picklable ``ClientConfig.sasl_mechanism_factory``: for each
connection to a broker at ``host`` it builds a GSS-API context for the service principal
``<service name>/<host>`` and hands it to ``protocol.sasl_gssapi.GssapiMechanism``.

Credentials: with a keytab, through MIT's credential store (the keytab as ``client_keytab``,
tickets in a private ``MEMORY:`` cache of this process, or in ``ticketCache`` when
``useTicketCache=true`` is given too), so the library signs in again from the keytab when
the ticket expires: a long stream keeps working past the ticket lifetime. With
``useTicketCache=true`` alone: the tickets ``kinit`` left in ``ticketCache``, ``KRB5CCNAME``
or the default cache. The Kerberos configuration is the user's own (``KRB5_CONFIG``,
``/etc/krb5.conf``). The ``gssapi`` package is the ``kerberos`` extra; without it a GSSAPI
job fails at once saying so. A refusal is an ``AuthenticationError`` naming the principal,
the service principal and the cause (never retried).
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from protocol.errors import AuthenticationError, ConfigError, KafkaConnectionError
from protocol.sasl_gssapi import KRB5_LOGIN_MODULE, GssapiMechanism

from . import trust
from .bounded_cache import BoundedCache

__all__ = [
    "SERVICE_NAME_OPTION",
    "KERBEROS_EXTRA",
    "KerberosFactory",
    "kerberos_factory",
    "require_gssapi",
]

SERVICE_NAME_OPTION = "kafka.sasl.kerberos.service.name"
KERBEROS_EXTRA = "pip install 'pyspark-pykafka[kerberos]'"
#: The options of the JDK's Krb5LoginModule; those not listed in ``_USED`` change nothing
#: here (the JVM's login and prompting details).
_MODULE_OPTIONS = {
    "useKeyTab",
    "keyTab",
    "principal",
    "useTicketCache",
    "ticketCache",
    "storeKey",
    "doNotPrompt",
    "renewTGT",
    "refreshKrb5Config",
    "isInitiator",
    "debug",
    "tryFirstPass",
    "useFirstPass",
    "storePass",
    "clearPass",
}
#: Causes of a refused sign-in, by the words of MIT Kerberos' message (the first that
#: matches): what to tell the user.
_WRONG_KEYS = "the keytab holds wrong or outdated keys for the principal"
_NO_TICKET = "no Kerberos ticket (run kinit, or use a keytab)"
_CAUSES = tuple(
    (re.compile(words), why)
    for words, why in (
        (r"Server .*not found in Kerberos database", "the service principal is unknown to the KDC"),
        (r"Client .*not found in Kerberos database", "the principal is unknown to the KDC"),
        (r"not found in Kerberos database", "a principal is unknown to the KDC"),
        (r"Preauthentication failed", _WRONG_KEYS),
        (r"Decrypt integrity check failed", _WRONG_KEYS),
        (r"Key table entry not found", "the keytab holds no key for the principal"),
        (r"No key table entry found", "the keytab holds no key for the principal"),
        (r"Key table file .* not found", "the keytab file does not exist"),
        (
            r"Clock skew too great",
            "clock skew: the clocks of this host and the KDC or broker differ by more than "
            "Kerberos allows (clockskew in krb5.conf, 300 s by default)",
        ),
        (r"Ticket expired", "the ticket expired (renew it with kinit)"),
        (r"No Kerberos credentials available", _NO_TICKET),
        (r"No credentials cache found", _NO_TICKET),
        (r"No credentials were supplied", _NO_TICKET),
    )
)
_OUTAGE = ("Cannot contact any KDC", "Cannot find KDC")


def require_gssapi() -> Any:
    """The ``gssapi`` module, or ConfigError naming the extra that installs it."""
    try:
        import gssapi
    except ImportError as e:
        raise ConfigError(
            "kafka.sasl.mechanism GSSAPI (Kerberos) needs the gssapi package, which is not "
            f"installed in this Python: {KERBEROS_EXTRA} (it builds against MIT Kerberos, "
            "e.g. apt-get install libkrb5-dev)"
        ) from e
    return gssapi


def _flag(options: dict[str, str], name: str) -> bool:
    value = options.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"kafka.sasl.jaas.config: {name} must be true or false, not {value!r}")
    return value == "true"


@dataclass(frozen=True)
class KerberosFactory:
    """``ClientConfig.sasl_mechanism_factory`` of GSSAPI: a fresh context per sign-in."""

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None  # None: the ticket cache only
    ticket_cache: str | None = None  # None: KRB5CCNAME or the default cache

    @property
    def who(self) -> str:
        return self.principal or "the ticket cache's principal"

    def __call__(self, host: str) -> GssapiMechanism:
        gssapi = require_gssapi()
        service = f"{self.service_name}/{host}"
        try:
            target = gssapi.Name(f"{self.service_name}@{host}", gssapi.NameType.hostbased_service)
            context = gssapi.SecurityContext(
                name=target,
                creds=self._credentials(gssapi),
                usage="initiate",
                flags=gssapi.RequirementFlag.mutual_authentication,
            )
        except gssapi.exceptions.GSSError as e:
            raise self.refusal(e, service) from None
        return GssapiMechanism(_Context(context, self, service), self.who)

    def refusal(self, error: Exception, service: str) -> Exception:
        """The library's ``error`` as an AuthenticationError naming the principal, the
        service principal and the cause (a KDC out of reach: KafkaConnectionError)."""
        text = " ".join(str(error).split())
        where = f"Kerberos sign-in of {self.who} to the service {service} failed"
        if any(words in text for words in _OUTAGE):
            return KafkaConnectionError(f"{where}: the KDC cannot be reached ({text})")
        cause = next((why for words, why in _CAUSES if words.search(text)), None)
        if cause == _NO_TICKET and self.keytab:  # the library found nothing to log in with
            cause = "the keytab is missing, unreadable or holds no key for the principal"
        head = f"{where}: {cause}" if cause else where
        if self.keytab:
            head += f" (keytab {self.keytab})"
        return AuthenticationError(f"{head}; Kerberos says: {text}")

    def _credentials(self, gssapi: Any) -> Any:
        if self.keytab is None:  # a ticket cache: read afresh (kinit may have renewed it)
            return self._acquire(gssapi)
        key = (self.principal, self.keytab, self.ticket_cache)
        with _LOCK:
            creds = _CREDENTIALS.get(key)
            if creds is None or _remaining_s(creds) < RELOGIN_MARGIN_S:
                # a handle never renews its own ticket: log in again from the keytab
                creds = _CREDENTIALS.put(key, self._acquire(gssapi))
            return creds

    def _acquire(self, gssapi: Any) -> Any:
        name = None
        if self.principal is not None:
            name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
        store: dict[str, str] = {}
        if self.keytab is not None:
            store["client_keytab"] = self.keytab
            # a new private cache for each login (a ticketCache given is renewed in place)
            store["ccache"] = self.ticket_cache or f"MEMORY:pykafka-{os.getpid()}-{uuid.uuid4()}"
        elif self.ticket_cache is not None:
            store["ccache"] = self.ticket_cache
        if not store:
            return gssapi.Credentials(name=name, usage="initiate")
        return gssapi.Credentials(name=name, usage="initiate", store=store)


def _remaining_s(creds: Any) -> float:
    """Seconds the credentials' ticket stays valid (0 when expired or unknown)."""
    try:
        lifetime = creds.lifetime
    except Exception:  # gssapi raises ExpiredCredentialsError (and others) once it ended
        return 0
    return float("inf") if lifetime is None else lifetime


#: Log in again from the keytab when the ticket has less than this left, so no sign-in
#: starts with a ticket about to end.
RELOGIN_MARGIN_S = 10
_LOCK = threading.Lock()
#: Keytab credentials per (principal, keytab, cache) in this process: one login serves every
#: connection until its ticket expires (then the library logs in again from the keytab).
_CREDENTIALS: BoundedCache[tuple, Any] = BoundedCache(16)


class _Context:
    """A ``gssapi.SecurityContext`` whose errors name the principal and the cause."""

    def __init__(self, context: Any, factory: KerberosFactory, service: str) -> None:
        self._context, self._factory, self._service = context, factory, service

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    def _call(self, method: str, *args: Any) -> Any:
        import gssapi

        try:
            return getattr(self._context, method)(*args)
        except gssapi.exceptions.GSSError as e:
            raise self._factory.refusal(e, self._service) from None

    def step(self, token: bytes | None = None) -> bytes | None:
        return self._call("step", token)

    def wrap(self, data: bytes, encrypt: bool) -> object:
        return self._call("wrap", data, encrypt)

    def unwrap(self, data: bytes) -> object:
        return self._call("unwrap", data)


def kerberos_factory(opts: Any) -> KerberosFactory:
    """The ``KerberosFactory`` of the GSSAPI options (``kafka.sasl.jaas.config`` with the
    Krb5LoginModule, ``kafka.sasl.kerberos.service.name``); ConfigError naming the option."""
    jaas = opts.get("kafka.sasl.jaas.config")
    if jaas is None:
        raise ConfigError(
            "kafka.sasl.mechanism GSSAPI needs kafka.sasl.jaas.config: "
            f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="/path/to.keytab" '
            'principal="user@REALM"; (or useTicketCache=true;)'
        )
    options = trust.jaas_options(jaas, "GSSAPI")
    unknown = sorted(set(options) - _MODULE_OPTIONS)
    if unknown:
        raise ConfigError(
            f"kafka.sasl.jaas.config: unknown Krb5LoginModule options {unknown}; "
            f"known: {sorted(_MODULE_OPTIONS)}"
        )
    service = (opts.get(SERVICE_NAME_OPTION) or "kafka").strip()
    if not service or "/" in service or "@" in service:
        raise ConfigError(f"{SERVICE_NAME_OPTION}: {service!r} is not a service name")
    principal = options.get("principal") or None
    use_keytab, use_cache = _flag(options, "useKeyTab"), _flag(options, "useTicketCache")
    keytab = options.get("keyTab") or None
    if not use_keytab and not use_cache:
        raise ConfigError(
            "kafka.sasl.jaas.config: the Krb5LoginModule needs useKeyTab=true (with keyTab "
            "and principal) or useTicketCache=true: this client cannot prompt for a password"
        )
    if use_keytab:
        if principal is None:
            raise ConfigError("kafka.sasl.jaas.config: useKeyTab=true needs principal")
        keytab = keytab or os.environ.get("KRB5_CLIENT_KTNAME") or None
        if keytab is None:
            raise ConfigError("kafka.sasl.jaas.config: useKeyTab=true needs keyTab")
        keytab = keytab.removeprefix("FILE:")
    cache = options.get("ticketCache") if use_cache else None
    require_gssapi()
    return KerberosFactory(service, principal, keytab if use_keytab else None, cache or None)
