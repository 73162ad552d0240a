"""Kerberos (SASL GSSAPI) as Spark's Kafka connector users sign in with it.

The options parsing and the missing-extra error run in ``make test``. The rest (marker
``security``, ``make test-security``) runs against a real MIT KDC and an Apache Kafka with a
GSSAPI listener, both started here (``kafka_testbed.kerberos.KerberosRealm``,
``KafkaCluster(kerberos=realm)``): a keytab login, a ``kinit`` ticket cache, a login renewed
past a short ticket lifetime, and the refusals (no ticket, a wrong keytab, an unknown service
principal, a KDC whose clock runs 10 minutes ahead under libfaketime), each an
``AuthenticationError`` naming the principal and the cause; and a Spark job of its own (a
child process: ``tests/helpers/kerberos_spark_child.py``) writing and reading over Kerberos.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafka_common.kerberos import KERBEROS_EXTRA, KerberosFactory
from kafka_source.options import parse_reader_options
from protocol.errors import AuthenticationError, ConfigError

from .helpers.waiting import wait_until
from .helpers.signin_cluster import client_for, round_trip

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
REPO = Path(__file__).resolve().parent.parent


def _options(jaas: str | None, **more: str) -> dict:
    options = {
        "kafka.bootstrap.servers": "localhost:9092",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "GSSAPI",
        "subscribe": "t",
        **more,
    }
    if jaas is not None:
        options["kafka.sasl.jaas.config"] = jaas
    return options


def _factory(options: dict) -> KerberosFactory:
    return parse_reader_options(options).client_config.sasl_mechanism_factory


# ---- options -------------------------------------------------------------------------------

#: Parsing a GSSAPI job's options imports the ``kerberos`` extra (a job without it fails at
#: once), which make test's env lacks: these run in make test-security, which installs it.
needs_gssapi = pytest.mark.security


@needs_gssapi
def test_keytab_jaas_line_becomes_the_factory():
    jaas = f'{KRB5} required useKeyTab=true storeKey=true keyTab="/k/app.keytab" principal="app@R";'
    factory = _factory(_options(jaas))
    assert factory == KerberosFactory("kafka", "app@R", "/k/app.keytab", None)
    assert pickle.loads(pickle.dumps(factory)) == factory  # travels to executors
    shaded = _factory(
        _options("kafkashaded." + jaas, **{"kafka.sasl.kerberos.service.name": "kfk"})
    )
    assert shaded == KerberosFactory("kfk", "app@R", "/k/app.keytab", None)


@needs_gssapi
def test_ticket_cache_jaas_line_becomes_the_factory():
    factory = _factory(_options(f"{KRB5} required useTicketCache=true;"))
    assert factory == KerberosFactory("kafka", None, None, None)
    named = _factory(_options(f'{KRB5} required useTicketCache=true ticketCache="/tmp/cc";'))
    assert named.ticket_cache == "/tmp/cc"


@needs_gssapi
@pytest.mark.parametrize(
    ("jaas", "words"),
    [
        (None, "GSSAPI needs kafka.sasl.jaas.config"),
        (f"{KRB5} required;", "useKeyTab=true"),
        (f'{KRB5} required useKeyTab=true keyTab="/k";', "needs principal"),
        (f'{KRB5} required useKeyTab=yes principal="a";', "useKeyTab must be true or false"),
        (f'{KRB5} required useTicketCache=true keytab="/k";', "unknown Krb5LoginModule options"),
        (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
            'password="p";',
            f"use {KRB5}",
        ),
    ],
)
def test_bad_gssapi_options_name_the_option(jaas, words):
    with pytest.raises(ConfigError, match="kafka.sasl") as caught:
        _factory(_options(jaas))
    assert words in str(caught.value)


@needs_gssapi
def test_bad_service_name_is_refused():
    options = _options(
        f"{KRB5} required useTicketCache=true;", **{"kafka.sasl.kerberos.service.name": "a/b"}
    )
    with pytest.raises(ConfigError, match="kafka.sasl.kerberos.service.name"):
        _factory(options)


def test_gssapi_without_the_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gssapi", None)  # what `import gssapi` meets uninstalled
    with pytest.raises(ConfigError) as caught:
        _factory(_options(f"{KRB5} required useTicketCache=true;"))
    assert KERBEROS_EXTRA in str(caught.value)
    with pytest.raises(ConfigError) as caught:  # and on an executor, at the sign-in
        KerberosFactory("kafka", None, None, None)("localhost")
    assert KERBEROS_EXTRA in str(caught.value)


# ---- against a KDC and Apache Kafka (make test-security) -----------------------------------


@pytest.fixture(scope="module")
def realm():
    # make test-security installs both first (scripts/ensure_kerberos.sh): missing, it fails
    import gssapi  # noqa: F401

    from kafka_testbed.kerberos import KerberosRealm, kerberos_tools_missing

    assert not kerberos_tools_missing(), "MIT Kerberos missing: run scripts/ensure_kerberos.sh"
    with KerberosRealm() as running:
        yield running


@pytest.fixture(scope="module")
def kafka(realm):
    from kafka_testbed import KafkaCluster

    # sessions of 5 s: every connection signs in again (a new service ticket) while it lives
    with KafkaCluster(kerberos=realm, reauth_ms=5000) as cluster:
        yield cluster


@pytest.fixture
def krb5_env(realm, monkeypatch):
    for name, value in realm.client_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KRB5CCNAME", raising=False)
    return realm


def _user(realm, **kwargs) -> str:
    """A principal of the test's own (logins are cached per principal in the process)."""
    name = f"u{uuid.uuid4().hex[:8]}"
    realm.add_principal(name, **kwargs)
    return name


def _gssapi(kafka, jaas: str, **more: str) -> dict:
    return {
        "kafka.bootstrap.servers": kafka.listener("GSSAPI"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "GSSAPI",
        "kafka.sasl.jaas.config": jaas,
        "kafka.request.timeout.ms": "10000",
        **more,
    }


def _keytab_jaas(realm, name: str, keytab=None) -> str:
    path = keytab or realm.keytab(name)
    return (
        f'{KRB5} required useKeyTab=true storeKey=true keyTab="{path}" '
        f'principal="{realm.principal(name)}";'
    )


def _as_requests(realm, name: str) -> int:
    """Initial tickets (AS-REQ answered) the KDC issued to ``name``."""
    log = (realm.dir / "kdc.log").read_text(errors="replace")
    return sum(
        1
        for line in log.splitlines()
        if "AS_REQ" in line and f"{realm.principal(name)} for" in line
    )


@pytest.mark.security
def test_keytab_login_reads_and_writes(kafka, krb5_env):
    realm = krb5_env
    name = _user(realm, keytab=True)
    with client_for(_gssapi(kafka, _keytab_jaas(realm, name))) as client:
        assert round_trip(client, "krb-keytab", [b"a", b"b"]) == [b"a", b"b"]
    assert _as_requests(realm, name) >= 1


@pytest.mark.security
def test_ticket_cache_from_kinit(kafka, krb5_env, tmp_path, monkeypatch):
    realm = krb5_env
    name = _user(realm, keytab=True)
    cache = tmp_path / "ccache"
    realm.kinit(name, cache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    options = _gssapi(kafka, f"{KRB5} required useTicketCache=true;")
    with client_for(options) as client:
        assert round_trip(client, "krb-cache", [b"c"]) == [b"c"]


@pytest.mark.security
def test_keytab_login_renewed_past_the_ticket_lifetime(kafka, krb5_env):
    realm = krb5_env
    name = _user(realm, keytab=True, max_life="15s")
    options = _gssapi(kafka, _keytab_jaas(realm, name))
    with client_for(options) as client:
        assert round_trip(client, "krb-relogin", [b"1"]) == [b"1"]
        first_login, logins = time.monotonic(), _as_requests(realm, name)
        assert logins >= 1
        # past the first ticket's end, the same client (its sessions renewed every 5 s)
        # and a new one keep working: the library logged in again from the keytab
        wait_until(lambda: time.monotonic() > first_login + 20, timeout=40, what="ticket end")
        client.metadata(["krb-relogin"])
        with client_for(options) as fresh:
            assert round_trip(fresh, "krb-relogin-2", [b"2"]) == [b"2"]
    assert _as_requests(realm, name) > logins


def _refusal(options: dict) -> str:
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        with client_for(options) as client:
            client.metadata([])
    assert time.monotonic() - started < 10, "a refusal must not be retried"
    return str(caught.value)


@pytest.mark.security
def test_no_ticket_is_refused(kafka, krb5_env, tmp_path, monkeypatch):
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
    text = _refusal(_gssapi(kafka, f"{KRB5} required useTicketCache=true;"))
    assert "no Kerberos ticket" in text and "kafka/localhost" in text


@pytest.mark.security
def test_wrong_keytab_is_refused(kafka, krb5_env):
    realm = krb5_env
    name = _user(realm, keytab=True)
    realm.rekey(name)  # the keytab's keys are now outdated
    text = _refusal(_gssapi(kafka, _keytab_jaas(realm, name)))
    assert realm.principal(name) in text
    assert "wrong or outdated keys" in text and str(realm.keytab(name)) in text
    other = _user(realm, keytab=True)  # a keytab with no key for the principal at all
    text = _refusal(_gssapi(kafka, _keytab_jaas(realm, name, keytab=realm.keytab(other))))
    assert realm.principal(name) in text and "no key for the principal" in text


@pytest.mark.security
def test_unknown_service_principal_is_refused(kafka, krb5_env):
    realm = krb5_env
    name = _user(realm, keytab=True)
    options = _gssapi(
        kafka, _keytab_jaas(realm, name), **{"kafka.sasl.kerberos.service.name": "nosuch"}
    )
    text = _refusal(options)
    assert realm.principal(name) in text and "nosuch/localhost" in text
    assert "service principal is unknown" in text


# ---- a Spark job, as a Spark user runs it (make test-security) -----------------------------


def _keys_of(realm, keytab) -> list[str]:
    """The keys a keytab holds, in hex as ``klist -K`` prints them (and in base64)."""
    from kafka_testbed.kerberos import _tool

    listing = subprocess.run(
        [_tool("klist") or "klist", "-k", "-K", "-e", str(keytab)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **realm.client_env()},
        check=True,
    ).stdout
    hexes = re.findall(r"\(0x([0-9a-f]{32,})\)", listing)
    assert hexes, listing
    return [
        form for h in hexes for form in (h, h.upper(), base64.b64encode(bytes.fromhex(h)).decode())
    ]


@pytest.mark.security
def test_spark_job_over_kerberos(kafka, krb5_env, tmp_path):
    """A Spark job of its own (a child process, local[2]) whose environment holds
    KRB5_CONFIG before its session starts, as spark-submit would pass it: df.write, then
    spark.read and a readStream (AvailableNow) of the same rows over SASL_PLAINTEXT GSSAPI,
    signed in from a keytab whose path is in kafka.sasl.jaas.config. The driver and the
    Python workers each log in (the KDC issued several tickets), and no key of the keytab
    is in the plan, the output or the logs (pykafka's at DEBUG)."""
    realm = krb5_env
    name = _user(realm, keytab=True)
    keytab = realm.keytab(name)
    topic = f"krb-spark-{uuid.uuid4().hex[:6]}"
    options = _gssapi(kafka, _keytab_jaas(realm, name))
    with client_for(options) as client:
        client.create_topics({topic: 2})
        client.wait_for_topics([topic])
    spec = {"options": options, "topic": topic, "rows": 30, "checkpoint": str(tmp_path / "cp")}
    env = {k: v for k, v in os.environ.items() if k != "KRB5CCNAME"}
    env.update(realm.client_env())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    child = subprocess.run(
        [sys.executable, "-m", "tests.helpers.kerberos_spark_child", json.dumps(spec)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    expected = [[f"k{i:03d}", f"v{i:03d}"] for i in range(30)]
    assert result["read"] == expected
    assert result["streamed"] == expected
    assert _as_requests(realm, name) >= 2  # the driver's Python and a worker's logged in
    out = child.stdout + child.stderr
    assert "== Physical Plan ==" in child.stdout
    assert str(keytab) in options["kafka.sasl.jaas.config"]
    leaks = [key for key in _keys_of(realm, keytab) if key in out]
    assert leaks == []


@pytest.mark.security
def test_clock_skew_is_refused(kafka, tmp_path, monkeypatch):
    """A KDC whose clock runs 10 minutes ahead (libfaketime; the realm allows 300 s) and a
    principal that must pre-authenticate: the KDC refuses the keytab login with
    KRB_AP_ERR_SKEW. The client's krb5.conf has kdc_timesync = 0: with MIT's default (1)
    the library takes the KDC's time from its first answer and corrects its own by it."""
    from kafka_testbed.kerberos import KerberosRealm

    with KerberosRealm(time_offset="+10m", kdc_timesync=False) as skewed:
        name = _user(skewed, keytab=True)
        skewed.kadmin("modprinc", "+requires_preauth", skewed.principal(name))
        for key, value in skewed.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("KRB5CCNAME", raising=False)
        text = _refusal(_gssapi(kafka, _keytab_jaas(skewed, name)))
        log = (skewed.dir / "kdc.log").read_text(errors="replace")
    assert skewed.principal(name) in text and "clock skew" in text, text
    assert "Clock skew too great" in log  # the KDC refused it, on its own clock
