"""Key and trust stores as Kafka's Java client reads them: JKS, PKCS12 and PEM.

The stores are made as a Java user makes them, by the JDK's ``keytool`` (and ``openssl``
for the PKCS12 it imports from), from the sign-in cluster's certificates
(``tests/helpers/signin_cluster.py``); mutual TLS runs against that cluster's ``SSL`` listener,
which requires a client certificate from its CA (``ssl.client.auth=required``).

The JKS reader is ours (``protocol/tls_stores/jks.py``): a good store, a wrong password,
a wrong key password, and every truncation and flipped byte of a store give a typed
``StoreError``, never an ``IndexError``. Each misuse of an option fails within
``REFUSED_WITHIN_S`` naming the option and never quoting a password.
"""

from __future__ import annotations

import pickle
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_sink.options import parse_writer_options
from kafka_source.options import parse_reader_options
from protocol.client.tls import build_ssl_context
from protocol.client.tls_protocols import openssl_cipher
from protocol.errors import AuthenticationError, ConfigError, PyKafkaError
from protocol.tls_stores import StoreError, WrongPasswordError
from protocol.tls_stores.jks import read_jks
from protocol.tls_stores.pkcs12 import MISSING_EXTRA

from .helpers.secrets import assert_no_secret
from .helpers.signin_cluster import client_for, round_trip

REFUSED_WITHIN_S = 10.0
STORE_PASSWORD = "St0re-pw-do-not-leak"
KEY_PASSWORD = "K3y-pw-do-not-leak"
TRUST_PASSWORD = "Tru5t-pw-do-not-leak"
SECRETS = [STORE_PASSWORD, KEY_PASSWORD, TRUST_PASSWORD]


def _keytool() -> str:
    from kafka_testbed.broker_node import java_executable

    return str(Path(java_executable()).resolve().parent / "keytool")


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args[0]} failed: {done.stderr}{done.stdout}"


def _import_key(keytool: str, p12: Path, dest: Path, kind: str, key_password: str) -> None:
    _run(
        keytool, "-importkeystore", "-noprompt",
        "-srckeystore", str(p12), "-srcstoretype", "PKCS12", "-srcstorepass", STORE_PASSWORD,
        "-destkeystore", str(dest), "-deststoretype", kind, "-deststorepass", STORE_PASSWORD,
        "-destkeypass", key_password,
    )  # fmt: skip


@pytest.fixture(scope="module")
def stores(signin_pki, tmp_path_factory) -> Path:
    """The client's key and the CA in every store kind, in one directory:
    ``trust.jks``/``trust.p12`` (the CA), ``client.jks``/``client.p12`` (the client's key and
    certificate, keytool's), ``client-keypass.jks`` (its key under ``KEY_PASSWORD``),
    ``client.pem`` (PKCS#8 key + chain), ``client-encrypted.pem`` (the key encrypted with
    ``KEY_PASSWORD``), ``other-trust.jks`` (another CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    pki, out = signin_pki, tmp_path_factory.mktemp("key-stores")
    keytool = _keytool()
    for name, ca in (("trust", "ca.pem"), ("other-trust", "other-ca.pem")):
        for kind, ext in (("JKS", "jks"), ("PKCS12", "p12")):
            _run(
                keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(pki / ca),
                "-keystore", str(out / f"{name}.{ext}"), "-storetype", kind,
                "-storepass", TRUST_PASSWORD,
            )  # fmt: skip
    _run(
        "openssl", "pkcs12", "-export", "-in", str(pki / "client.pem"),
        "-inkey", str(pki / "client.key"), "-name", "client",
        "-out", str(out / "openssl.p12"), "-passout", f"pass:{STORE_PASSWORD}",
    )  # fmt: skip
    _import_key(keytool, out / "openssl.p12", out / "client.jks", "JKS", STORE_PASSWORD)
    _import_key(keytool, out / "openssl.p12", out / "client.p12", "PKCS12", STORE_PASSWORD)
    _import_key(keytool, out / "openssl.p12", out / "client-keypass.jks", "JKS", KEY_PASSWORD)
    _run(
        "openssl", "pkcs8", "-topk8", "-nocrypt", "-in", str(pki / "client.key"),
        "-out", str(out / "client.pkcs8"),
    )  # fmt: skip
    _run(
        "openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(pki / "client.key"),
        "-out", str(out / "client-encrypted.pkcs8"), "-passout", f"pass:{KEY_PASSWORD}",
    )  # fmt: skip
    chain = (pki / "client.pem").read_bytes()
    (out / "client.pem").write_bytes((out / "client.pkcs8").read_bytes() + chain)
    (out / "client-encrypted.pem").write_bytes(
        (out / "client-encrypted.pkcs8").read_bytes() + chain
    )
    return out


def _der(pem_path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_path.read_text())


OFFLINE = "127.0.0.1:9"  # for what fails before connecting


def ssl_options(where, **stores: str) -> dict:
    """Options for the ``SSL`` listener (mutual TLS) of the cluster ``where`` (or the
    address ``where``) with ``stores`` as kafka.ssl.* options (``truststore_location=...``
    -> ``kafka.ssl.truststore.location``)."""
    return {
        "kafka.bootstrap.servers": where if isinstance(where, str) else where.listener("SSL"),
        "kafka.security.protocol": "SSL",
        "kafka.request.timeout.ms": "10000",
        **{"kafka.ssl." + k.replace("_", "."): v for k, v in stores.items()},
    }


def jks_stores(stores: Path) -> dict:
    return dict(
        truststore_location=str(stores / "trust.jks"),
        truststore_password=TRUST_PASSWORD,
        keystore_location=str(stores / "client.jks"),
        keystore_password=STORE_PASSWORD,
    )


def refusal(options: dict) -> PyKafkaError:
    """The error of connecting with ``options``: within the bound, naming no password."""
    started = time.monotonic()
    with pytest.raises(PyKafkaError) as info:
        with client_for(options) as client:
            client.refresh_metadata([])
    took = time.monotonic() - started
    assert took < REFUSED_WITHIN_S, f"refused after {took:.1f} s: {info.value}"
    assert_no_secret(info.value, secrets=SECRETS)
    return info.value


# ---- the JKS reader ---------------------------------------------------------------------------


def test_jks_reader_reads_keytool_s_trust_and_key_stores(stores, signin_pki):
    trust = read_jks((stores / "trust.jks").read_bytes(), TRUST_PASSWORD)
    assert trust.certificates == (_der(signin_pki / "ca.pem"),) and trust.keys == ()
    key_store = read_jks((stores / "client.jks").read_bytes(), STORE_PASSWORD)
    (key,) = key_store.keys
    assert key.chain_der[0] == _der(signin_pki / "client.pem")
    # the key decrypted is the client's: OpenSSL loads it with its certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    path = stores / "from-jks.pem"
    path.write_bytes(key.key_pem + (signin_pki / "client.pem").read_bytes())
    try:
        context.load_cert_chain(str(path))
    finally:
        path.unlink()
    # a trust store read without a password (as Java may) skips the integrity check only
    assert read_jks((stores / "trust.jks").read_bytes(), None).certificates == trust.certificates


def test_jks_reader_a_wrong_password_says_so(stores):
    with pytest.raises(WrongPasswordError, match="fails its integrity check: wrong password"):
        read_jks((stores / "trust.jks").read_bytes(), "wrong")
    data = (stores / "client-keypass.jks").read_bytes()
    with pytest.raises(WrongPasswordError, match="the key password does not decrypt"):
        read_jks(data, STORE_PASSWORD)  # the key's own password differs
    assert read_jks(data, STORE_PASSWORD, KEY_PASSWORD).keys


def test_jks_reader_every_truncation_and_flipped_byte_is_a_store_error(stores):
    """Without a password nothing checks the digest, so the parser meets every damage
    itself: each must be a StoreError, never IndexError or struct.error."""
    data = (stores / "client.jks").read_bytes()
    for end in range(len(data)):
        with pytest.raises(StoreError):
            read_jks(data[:end], None, STORE_PASSWORD)
    flipped_errors = 0
    for pos in range(len(data) - 20):
        tampered = bytearray(data)
        tampered[pos] ^= 0xFF
        # the digest catches every flip past the magic number (a flip in it: not JKS)
        with pytest.raises(WrongPasswordError if pos >= 4 else StoreError):
            read_jks(bytes(tampered), STORE_PASSWORD)
        try:
            read_jks(bytes(tampered), None, STORE_PASSWORD)
        except StoreError:
            flipped_errors += 1
        # a flip inside a certificate's bytes is not seen without the digest: no error
    assert flipped_errors > len(data) // 4


# ---- mutual TLS on Apache Kafka ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_mutual_tls_with_java_stores(signin_kafka, stores, topic_name, kind):
    ext = "jks" if kind == "JKS" else "p12"
    options = ssl_options(
        signin_kafka,
        truststore_location=str(stores / f"trust.{ext}"),
        truststore_password=TRUST_PASSWORD,
        truststore_type=kind,
        keystore_location=str(stores / f"client.{ext}"),
        keystore_password=STORE_PASSWORD,
        keystore_type=kind,
    )
    with client_for(options) as client:
        assert round_trip(client, topic_name, [kind.encode()]) == [kind.encode()]
    # the writer's options build the same connection
    writer = parse_writer_options({**options, "topic": topic_name}).client_config
    assert writer.ssl_java == client_for(options).config.ssl_java


def test_mutual_tls_with_a_jks_key_of_its_own_password(signin_kafka, stores, topic_name):
    options = ssl_options(
        signin_kafka,
        **{**jks_stores(stores), "keystore_location": str(stores / "client-keypass.jks")},
        key_password=KEY_PASSWORD,
    )
    with client_for(options) as client:
        assert round_trip(client, topic_name, [b"key-pass"]) == [b"key-pass"]


def test_mutual_tls_with_inline_pem(signin_kafka, stores, signin_pki, topic_name):
    """KIP-651: the CA, the chain and the (encrypted) key as option values."""
    options = ssl_options(
        signin_kafka,
        truststore_type="PEM",
        truststore_certificates=(signin_pki / "ca.pem").read_text(),
        keystore_type="PEM",
        keystore_certificate_chain=(signin_pki / "client.pem").read_text(),
        keystore_key=(stores / "client-encrypted.pkcs8").read_text(),
        key_password=KEY_PASSWORD,
    )
    with client_for(options) as client:
        assert round_trip(client, topic_name, [b"inline"]) == [b"inline"]


def test_mutual_tls_with_pem_store_files(signin_kafka, stores, signin_pki, topic_name):
    options = ssl_options(
        signin_kafka,
        truststore_type="PEM",
        truststore_location=str(signin_pki / "ca.pem"),
        keystore_type="PEM",
        keystore_location=str(stores / "client.pem"),
    )
    with client_for(options) as client:
        assert round_trip(client, topic_name, [b"pem-files"]) == [b"pem-files"]


def test_the_trust_store_alone_is_trusted(signin_kafka, stores):
    """A trust store of another CA: the broker is refused, naming the trust store."""
    options = ssl_options(
        signin_kafka,
        **{**jks_stores(stores), "truststore_location": str(stores / "other-trust.jks")},
    )
    error = refusal(options)
    assert isinstance(error, AuthenticationError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)
    assert "kafka.ssl.truststore.location" in str(error)


def test_cipher_suites_and_protocols_in_java_s_names_reach_the_handshake(
    signin_kafka, stores, topic_name
):
    """The broker's key is ECDSA: with TLS 1.2 alone, an ECDSA suite in Java's name
    connects and an RSA-only one cannot (so the list is applied, not ignored)."""
    base = ssl_options(signin_kafka, **jks_stores(stores), enabled_protocols="TLSv1.2")
    ecdsa = {**base, "kafka.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
    with client_for(ecdsa) as client:
        assert round_trip(client, topic_name, [b"tls12"]) == [b"tls12"]
    error = refusal({**base, "kafka.ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"})
    assert "TLS handshake" in str(error) and "HANDSHAKE_FAILURE" in str(error).upper()


# ---- refusals: at once, naming the option, never the password ---------------------------------


def test_a_wrong_store_password_is_refused_naming_the_option(signin_kafka, stores):
    for option, value in (
        ("keystore_password", TRUST_PASSWORD),
        ("truststore_password", STORE_PASSWORD),
    ):
        options = ssl_options(signin_kafka, **{**jks_stores(stores), option: value})
        error = refusal(options)
        assert isinstance(error, ConfigError)
        location = "kafka.ssl." + option.replace("_password", ".location")
        assert str(error).startswith(location) and "wrong password" in str(error)


def test_a_missing_file_a_wrong_type_and_a_store_without_a_key_are_refused(signin_kafka, stores):
    jks = jks_stores(stores)
    cases = [
        (
            {**jks, "keystore_location": str(stores / "nowhere.jks")},
            "kafka.ssl.keystore.location: no such file",
        ),
        ({**jks, "keystore_type": "PKCS12"}, "is a JKS store, not PKCS12"),
        ({**jks, "truststore_type": "PEM", "truststore_password": None}, "JKS store, not PEM"),
        (
            {
                **jks,
                "keystore_location": str(stores / "trust.jks"),
                "keystore_password": TRUST_PASSWORD,
            },
            "kafka.ssl.keystore.location: the JKS key store holds no private key",
        ),
    ]
    for stores_given, words in cases:
        stores_given = {k: v for k, v in stores_given.items() if v is not None}
        error = refusal(ssl_options(signin_kafka, **stores_given))
        assert isinstance(error, ConfigError) and words in str(error), str(error)


@pytest.mark.parametrize(
    "options,words",
    [
        ({"keystore_location": "/x.jks"}, "without kafka.ssl.keystore.password"),
        ({"truststore_password": "p"}, "kafka.ssl.truststore.password is set without"),
        ({"truststore_type": "JCEKS"}, "kafka.ssl.truststore.type: unsupported store type"),
        ({"truststore_certificates": "-----BEGIN"}, "needs kafka.ssl.truststore.type PEM"),
        ({"keystore_key": "k", "keystore_type": "PEM"}, "go together"),
        ({"enabled_protocols": "SSLv3"}, "kafka.ssl.enabled.protocols: unsupported"),
        ({"cipher_suites": "TLS_FOO_WITH_BAR"}, "kafka.ssl.cipher.suites"),
        ({"cafile": "/ca.pem", "truststore_location": "/t.jks"}, "give one"),
    ],
)
def test_inconsistent_options_fail_when_parsed(options, words):
    full = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "kafka.security.protocol": "SSL",
        "subscribe": "t",
        **{"kafka.ssl." + k.replace("_", "."): v for k, v in options.items()},
    }
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        parse_reader_options(full)


def test_a_pkcs12_store_without_cryptography_names_the_extra(stores, monkeypatch):
    """The extra is missing: simulated by hiding the module (it is in the dev set)."""
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.serialization.pkcs12", None)
    options = ssl_options(
        OFFLINE,
        truststore_location=str(stores / "trust.p12"),
        truststore_password=TRUST_PASSWORD,
        truststore_type="PKCS12",
    )
    java = parse_reader_options({**options, "subscribe": "t"}).client_config.ssl_java
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        build_ssl_context(java=java)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert (
        str(info.value) == f"kafka.ssl.truststore.location: the PKCS12 trust store {MISSING_EXTRA}"
    )
    assert "pip install 'pyspark-pykafka[pkcs12]'" in str(info.value)
    # JKS and PEM never need it
    options = {**ssl_options(OFFLINE, **jks_stores(stores)), "subscribe": "t"}
    jks = parse_reader_options(options).client_config.ssl_java
    assert build_ssl_context(java=jks).get_ca_certs()


# ---- secrets -----------------------------------------------------------------------------------


def test_store_secrets_never_reach_a_repr_yet_survive_pickling(stores):
    key_pem = (stores / "client.pkcs8").read_text()
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(stores / "trust.jks"),
        "kafka.ssl.truststore.password": TRUST_PASSWORD,
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\n-----END",
        "kafka.ssl.keystore.key": key_pem,
        "kafka.ssl.key.password": KEY_PASSWORD,
    }
    key_body = key_pem.splitlines()[1]
    reader = parse_reader_options({**options, "subscribe": "t"})
    writer = parse_writer_options({**options, "topic": "t"})
    for parsed in (reader, writer):
        assert_no_secret(parsed, parsed.client_config, secrets=[*SECRETS, key_body])
        clone = pickle.loads(pickle.dumps(parsed)).client_config
        assert clone.ssl_java.truststore_password.reveal() == TRUST_PASSWORD
        assert clone.ssl_java.keystore_key.reveal() == key_pem
        assert clone.ssl_key_password.reveal() == KEY_PASSWORD


def test_java_suite_names_map_to_openssl_s():
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"
    assert openssl_cipher("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256") == "ECDHE-ECDSA-AES128-SHA256"
    assert (
        openssl_cipher("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")
        == "ECDHE-RSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher("TLS_AES_128_GCM_SHA256") == "TLS_AES_128_GCM_SHA256"
    assert openssl_cipher("TLS_KRB5_WITH_3DES_EDE_CBC_SHA") is None


# ---- Spark: the stores are read by the tasks themselves ----------------------------------------


@pytest.mark.spark
def test_spark_writes_with_jks_and_reads_with_pkcs12_stores(
    spark, signin_kafka, stores, topic_name
):
    """df.write with JKS stores and spark.read with PKCS12 stores over mutual TLS: the
    options reach the tasks, which read the stores from the paths given."""
    jks = ssl_options(signin_kafka, **jks_stores(stores))
    with client_for(jks) as client:
        client.create_topics({topic_name: 2})
    expected = [f"row-{i:02d}" for i in range(10)]
    (
        spark.createDataFrame(
            [(v, i % 2) for i, v in enumerate(expected)], "value string, partition int"
        )
        .write.format("pykafka")
        .mode("append")
        .options(**jks)
        .option("topic", topic_name)
        .save()
    )
    pkcs12 = ssl_options(
        signin_kafka,
        truststore_location=str(stores / "trust.p12"),
        truststore_password=TRUST_PASSWORD,
        truststore_type="PKCS12",
        keystore_location=str(stores / "client.p12"),
        keystore_password=STORE_PASSWORD,
        keystore_type="PKCS12",
    )
    rows = (
        spark.read.format("pykafka")
        .options(**pkcs12)
        .option("subscribe", topic_name)
        .load()
        .selectExpr("CAST(value AS STRING) AS v", "partition")
        .collect()
    )
    assert sorted((r.v, r.partition) for r in rows) == [(v, i % 2) for i, v in enumerate(expected)]


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "private-dir"])
def test_the_decrypted_key_is_readable_by_its_owner_only_and_gone_after(monkeypatch, memfd):
    """Where the key goes for load_cert_chain: an in-memory file, or (without memfd_create)
    a file of mode 0600 in a directory of mode 0700, removed when the load is done."""
    import os
    import stat

    from protocol.client import tls_stores

    if not memfd:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    elif not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create here")
    with tls_stores._private_file(b"key bytes") as path:
        assert Path(path).read_bytes() == b"key bytes"
        if memfd:
            assert path.startswith("/proc/self/fd/")
            assert "memfd:" in os.readlink(path)  # in memory, on no file system
        else:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert not os.path.exists(path) or memfd
    if not memfd:
        assert not os.path.exists(os.path.dirname(path))
