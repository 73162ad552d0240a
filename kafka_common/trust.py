"""Options are data, not code: every URL, file and callable an option names passes here.

Options are often written by someone other than the cluster's operator (SQL ``OPTIONS``,
Spark Connect, a notebook), so the operator decides what they may reach with two variables
set for the driver and every Python worker, as Kafka's
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` does for the JVM:

- ``PYKAFKA_ALLOWED_URLS``: comma-separated URLs a token endpoint, token file (``file:``),
  STS endpoint and Schema Registry may use; matched exactly as Kafka does (a trailing ``/``
  aside; ``file:/p`` = ``file:///p``). Unset or empty: no token endpoint, token file or STS
  endpoint (Kafka 4.x's default), any registry; once set, registries must be listed too.
- ``PYKAFKA_ALLOWED_CALLBACKS``: comma-separated ``module:function`` token callbacks. Unset:
  none, apart from the entry-point group ``pyspark_pykafka.oauth_callbacks`` (installing a
  package is an operator's act) and the connector's own.

The checks run where options are read (driver) and again in the process that uses them
(executor), against that process's environment; errors name option, value and variable.
Also here: HTTP without redirects and with bounded answers (``open_url``, ``read_bounded``),
names a registry may give files (``safe_relative_path``), the warning about secrets in the
clear (``warn_plaintext``) and the check of a ``kafka.sasl.jaas.config`` login module
(``check_login_module``, with or without Databricks' ``kafkashaded.`` prefix).
"""

from __future__ import annotations

import logging
import os
import re
import time
import urllib.parse
from functools import cache
from typing import TYPE_CHECKING

from protocol.errors import AuthenticationError, ConfigError
from protocol.sasl import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    canonical_class,
    parse_jaas_options,
)

from .option_map import warn_once

if TYPE_CHECKING:  # urllib.request (http.client, email) is imported when a URL is opened
    import urllib.request

__all__ = [
    "URLS_ENV",
    "CALLBACKS_ENV",
    "CALLBACK_ENTRY_POINTS",
    "NotAllowedError",
    "check_url",
    "check_callback",
    "load_callback",
    "open_url",
    "read_bounded",
    "safe_relative_path",
    "warn_plaintext",
    "RedirectRefused",
    "LOGIN_MODULES",
    "check_login_module",
]

URLS_ENV = "PYKAFKA_ALLOWED_URLS"
CALLBACKS_ENV = "PYKAFKA_ALLOWED_CALLBACKS"
CALLBACK_ENTRY_POINTS = "pyspark_pykafka.oauth_callbacks"
#: Callbacks the connector itself maps a Java handler class to (never named by an option).
BUILTIN_CALLBACKS = frozenset({"kafka_common.oauth.google:token"})

#: What each kind of URL is, for the messages; registry URLs are allowed while the list is
#: unset, the others are not.
URL_KINDS = {"token endpoint": False, "token file": False, "STS endpoint": False, "registry": True}

log = logging.getLogger("pykafka.trust")


class NotAllowedError(ConfigError):
    """An option names a URL, file or callable the operator's allow-list does not hold."""


class RedirectRefused(AuthenticationError):
    """A token or STS endpoint answered with a redirect: none is followed."""


# ---- the allow-lists ------------------------------------------------------------------------


def _listed(variable: str) -> tuple[str, ...] | None:
    """The entries of ``variable`` (None when unset or empty)."""
    text = os.environ.get(variable, "")
    entries = tuple(e.strip() for e in text.split(",") if e.strip())
    return entries or None


def _file_path(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    from urllib.request import url2pathname

    return url2pathname(parts.path)


def _same_url(url: str, entry: str) -> bool:
    if url.rstrip("/") == entry.rstrip("/"):
        return True
    path, listed = _file_path(url), _file_path(entry)
    return (
        path is not None
        and listed is not None
        and path == listed
        and urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(entry).netloc
    )


def _where() -> str:
    return (
        f"the environment variable {URLS_ENV} of the driver and of every executor "
        f"(spark.executorEnv.{URLS_ENV})"
    )


def check_url(url: str, option: str, kind: str) -> str:
    """``url`` if the operator allows ``kind`` (one of ``URL_KINDS``) to use it; else
    NotAllowedError naming ``option``, the URL and ``PYKAFKA_ALLOWED_URLS``."""
    url = url.strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() == "file" and parts.netloc not in ("", "localhost"):
        raise NotAllowedError(
            f"{option}: {url!r} names a file on another host "
            f"({parts.netloc}); only local token files can be used"
        )
    entries = _listed(URLS_ENV)
    if entries is not None:
        wild = [e for e in entries if "*" in e]
        if wild:
            raise NotAllowedError(
                f"{URLS_ENV}: {wild[0]!r}: wildcards are not supported; list each URL exactly"
            )
        if any(_same_url(url, e) for e in entries):
            return url
        raise NotAllowedError(
            f"{option}: the {kind} URL {url!r} is not in {_where()}; "
            f"the operator must add {url} to it"
        )
    if URL_KINDS[kind]:
        return url
    raise NotAllowedError(
        f"{option}: the {kind} URL {url!r} is not allowed: {kind} URLs "
        f"must be listed in {_where()}, which is not set (none allowed); "
        f"the operator must set {URLS_ENV}={url}"
    )


def _entry_point_callbacks() -> set[str]:
    """The ``module:function`` values installed packages declare as token callbacks."""
    from importlib.metadata import entry_points

    try:
        found = entry_points(group=CALLBACK_ENTRY_POINTS)
    except Exception:  # a broken distribution's metadata must not break sign-in
        return set()
    return {ep.value.replace(" ", "") for ep in found}


def _canonical_callable(name: str) -> str:
    module, sep, attr = name.strip().partition(":")
    if not sep:
        module, _, attr = name.strip().rpartition(".")
    return f"{module}:{attr}"


def check_callback(name: str, option: str) -> str:
    """``name`` (``module:function``) if the operator allows it as a token callback, checked
    before anything is imported; else NotAllowedError naming ``option`` and
    ``PYKAFKA_ALLOWED_CALLBACKS``."""
    wanted = _canonical_callable(name)
    if wanted in BUILTIN_CALLBACKS:
        return wanted
    listed = {_canonical_callable(e) for e in _listed(CALLBACKS_ENV) or ()}
    if wanted in listed or wanted in _entry_point_callbacks():
        return wanted
    state = "which does not list it" if listed else "which is not set (none allowed)"
    raise NotAllowedError(
        f"{option}: the token callback {name!r} is not allowed: callbacks must be listed in "
        f"the environment variable {CALLBACKS_ENV} of the driver and of every executor "
        f"(spark.executorEnv.{CALLBACKS_ENV}), {state}, or declared by an installed package "
        f"under the entry-point group {CALLBACK_ENTRY_POINTS}; the operator must add "
        f"{wanted} to {CALLBACKS_ENV}"
    )


def load_callback(name: str, option: str):
    """The allowed function ``module:function``: checked by ``check_callback`` first (an
    import runs the module's code), then imported; ConfigError naming ``option``."""
    import importlib

    wanted = check_callback(name, option)
    module_name, _, attr = wanted.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{option}: {name!r} is not 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ConfigError(
            f"{option}: cannot import module {module_name!r} ({type(e).__name__}: {e})"
        ) from None
    target: object = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"{option}: module {module_name!r} has no {attr!r}")
    if not callable(target):
        raise ConfigError(f"{option}: {name!r} is not callable")
    return target


# ---- HTTP: no redirects, bounded answers -----------------------------------------------------


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}"


@cache
def _no_redirect() -> type:
    """The redirect handler that refuses every redirect: the request carries credentials (a
    Basic header with the client secret, a SigV4 signature) that must reach only the URL the
    operator allowed. Made at the first URL opened: a process that opens none (most of
    Spark's workers) never imports urllib.request."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            target = urllib.parse.urljoin(req.full_url, newurl)
            raise RedirectRefused(
                f"{req.full_url} answered HTTP {code}, a redirect to {_origin(target)}; "
                "redirects are not followed (the request carries credentials): configure the "
                "final URL instead"
            )

    return NoRedirect


def open_url(request: urllib.request.Request, *, timeout: float, context=None):
    """``urlopen`` of ``request`` following no redirect (RedirectRefused instead)."""
    import urllib.request

    handlers: list = [_no_redirect()()]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(request, timeout=timeout)


def read_bounded(response, limit: int, deadline: float, what: str) -> bytes:
    """At most ``limit`` bytes of ``response``'s body, read by ``deadline`` (monotonic);
    ConfigError/TimeoutError naming ``what`` when it sends more or takes longer (a slow
    drip would otherwise hold a sign-in for as long as it likes)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} kept sending past its time limit")
        chunk = response.read1(min(65536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ConfigError(f"{what} sent more than {limit} bytes")


# ---- names from a registry's answer ----------------------------------------------------------

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


def safe_relative_path(name: str, what: str) -> str:
    """``name`` as a relative path that stays inside the folder it is joined to: segments of
    letters, digits and ``_.+-`` separated by ``/``; no ``..``, no absolute path, no drive
    letter, no backslash. ConfigError naming ``what`` otherwise (the name came from a
    registry's answer: it is data)."""
    segments = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or ":" in name
        or any(s in ("", ".", "..") or not _SEGMENT.fullmatch(s) for s in segments)
    ):
        raise ConfigError(
            f"{what}: {name[:200]!r} is not a safe relative file name "
            "(segments of letters, digits, '_', '.', '+', '-' separated by '/'; "
            "no '..', no absolute path, no drive letter)"
        )
    return "/".join(segments)


# ---- login modules -------------------------------------------------------------------------

#: The JAAS login module of each SASL mechanism (Kafka's Java client's class names).
LOGIN_MODULES = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    "AWS_MSK_IAM": "software.amazon.msk.auth.iam.IAMLoginModule",
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",
}


def check_login_module(module: str, mechanism: str) -> str:
    """``module`` (the class a ``kafka.sasl.jaas.config`` names) without a ``kafkashaded.``
    prefix, if it is the login module of ``mechanism``; else ConfigError naming the one to
    use. The class is only compared, never loaded."""
    expected = LOGIN_MODULES[mechanism]
    if canonical_class(module) != expected:
        raise ConfigError(
            f"kafka.sasl.jaas.config: the login module {module} does not fit "
            f"kafka.sasl.mechanism {mechanism}; use {expected}"
        )
    return expected


def login_mechanism(module: str, mechanism: str | None) -> str:
    """The mechanism of a ``kafka.sasl.jaas.config`` naming ``module`` with
    ``kafka.sasl.mechanism`` ``mechanism`` (PLAIN when unset, but the ScramLoginModule needs
    one of the SCRAM mechanisms said), once ``check_login_module`` accepts the pair."""
    if mechanism is None:
        if canonical_class(module) == SCRAM_LOGIN_MODULE:
            raise ConfigError(
                "kafka.sasl.mechanism must be SCRAM-SHA-256 or "
                "SCRAM-SHA-512 with the ScramLoginModule of "
                "kafka.sasl.jaas.config"
            )
        mechanism = "PLAIN"
    check_login_module(module, mechanism)
    return mechanism


def jaas_options(jaas: str | None, mechanism: str) -> dict[str, str]:
    """The options of ``jaas`` (a ``kafka.sasl.jaas.config``, or None: no options) once its
    login module is ``mechanism``'s (``check_login_module``)."""
    if jaas is None:
        return {}
    module, options = parse_jaas_options(jaas)
    check_login_module(module, mechanism)
    return options


# ---- secrets in the clear --------------------------------------------------------------------


def warn_plaintext(key: str, message: str) -> None:
    """Warn once per process that a secret would travel unencrypted (``message`` says which
    and how to avoid it; it never holds the secret)."""
    warn_once(log, "plaintext:" + key, "%s", message)
