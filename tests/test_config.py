import pickle

import pytest

from protocol.config import ClientConfig, Secret, parse_host_port
from protocol.errors import ConfigError


def test_password_never_in_repr_str_or_pickle_text():
    c = ClientConfig(
        bootstrap_servers="a:1,b:2",
        security_protocol="sasl_ssl",
        sasl_mechanism="scram-sha-512",
        sasl_username="alice",
        sasl_password="hunter2",
        ssl_key_password="keypass",
    )
    for text in (
        repr(c),
        str(c),
        repr(c.sasl_password),
        str(c.sasl_password),
        f"{c.sasl_password}",
        repr(c.ssl_key_password),
    ):
        assert "hunter2" not in text and "keypass" not in text
    assert c.sasl_password.reveal() == "hunter2"
    restored = pickle.loads(pickle.dumps(c))  # executors receive it pickled
    assert restored.sasl_password.reveal() == "hunter2"
    assert isinstance(restored.sasl_password, Secret)
    assert c.bootstrap_servers == ["a:1", "b:2"]
    assert c.uses_tls and c.uses_sasl and c.sasl_mechanism == "SCRAM-SHA-512"


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"security_protocol": "TLS"}, "kafka.security.protocol"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"},
            "kafka.sasl.mechanism",
        ),
    ],
)
def test_bad_settings_name_the_option(kwargs, option):
    with pytest.raises(ConfigError, match=option):
        ClientConfig(**kwargs)


def test_parse_host_port():
    assert parse_host_port("localhost:9092") == ("localhost", 9092)
    assert parse_host_port("[::1]:9093") == ("::1", 9093)
    assert parse_host_port("PLAINTEXT://h:1") == ("h", 1)
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers"):
        parse_host_port("nohostport")


def test_security_options_the_protocol_leaves_unused_are_named(caplog):
    import logging

    from kafka_common.connection_options import security_settings
    from kafka_common.option_map import OptionMap

    log = logging.getLogger("pykafka.test_unused_security_options")
    opts = OptionMap(
        {
            "kafka.sasl.username": "u",
            "kafka.sasl.oauthbearer.scope": "s",
            "kafka.ssl.cafile": "/ca.pem",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
        }
    )
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert security_settings(opts, log) == {"security_protocol": "PLAINTEXT"}
    warnings = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert warnings == [
        "Options kafka.sasl.username, kafka.sasl.oauthbearer.scope are ignored because "
        "kafka.security.protocol is PLAINTEXT (use SASL_PLAINTEXT or SASL_SSL).",
        "Options kafka.ssl.cafile, kafka.ssl.truststore.type, kafka.ssl.cipher.suites are "
        "ignored because kafka.security.protocol is PLAINTEXT (use SSL or SASL_SSL).",
    ]
