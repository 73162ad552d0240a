"""OAUTHBEARER and AWS_MSK_IAM end to end through Spark, on a real data path.

OAUTHBEARER signs in to Apache Kafka itself: the sign-in cluster's SASL_SSL listener
(``tests/helpers/signin_cluster.py``), where Kafka's own JWKS validator checks the tokens the
connector fetched from the tests' OIDC issuer (Kafka fetches the issuer's JWKS from its
endpoint, on the broker JVM's ``org.apache.kafka.sasl.oauthbearer.allowed.urls``, and
expects its ``iss``), over TLS, with sessions of 3 s that long-lived connections (the
driver's offset reader, the stream's) must renew.

AWS_MSK_IAM is spoken by no Kafka these tests can run, so it alone keeps a stand-in: a SASL
front (``tests.helpers.sasl_relay_broker``) that recomputes each MSK IAM signature with botocore
and relays everything after the sign-in to a Tansu broker advertising the front's port.

A Spark driver in a child process (it needs AWS credentials and a region in its
environment, for its Python workers too, and the operator's URL allow-list) writes a
batch, reads it back, and streams it to a second topic with ``exactlyOnce``, for each
mechanism, with the options a JVM user copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_source.options import parse_reader_options
from protocol.client.cluster import KafkaClient

from .helpers.broker_setup import create_topic
from .helpers.sasl_relay_broker import SaslRelayBroker, tansu_behind
from .helpers.signin_cluster import CLIENT_SECRET
from .helpers.msk_iam import KEY, SECRET, check_msk_payload
from .helpers.oidc import jvm_options

REPO = Path(__file__).resolve().parent.parent
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
#: KIP-368: the MSK front ends every SASL session after this long; long-lived connections
#: must sign in again before, or their next request closes the connection (counted in
#: ``expired_sessions``). Kafka's sessions on the sign-in cluster last 3 s.
SESSION_MS = 4000

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _prepare(options: dict, name: str, tmp_path, broker=None) -> dict:
    """The source and target topics of ``name``, made through its own sign-in."""
    config = parse_reader_options({**options, "subscribe": "x"}).client_config
    with KafkaClient(config) as client:
        for topic in (f"{name}-src", f"{name}-dst"):
            if broker is None:
                client.create_topics({topic: 1})
            else:
                create_topic(broker, topic, 1, client=client)
    return {
        "options": options,
        "source": f"{name}-src",
        "target": f"{name}-dst",
        "checkpoint": str(tmp_path / f"{name}-checkpoint"),
    }


def test_batch_and_exactly_once_stream_through_oauthbearer_and_msk_iam(
    signin_kafka, signin_issuer, signin_pki, tmp_path, monkeypatch
):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    # the operator's allow-list: the child driver, its JVM and Python workers inherit it
    monkeypatch.setenv("PYKAFKA_ALLOWED_URLS", signin_issuer.token_endpoint)
    oauth_options = {
        **jvm_options(
            signin_kafka.listener("SASL_SSL"), signin_issuer.token_endpoint, secret=CLIENT_SECRET
        ),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.cafile": str(signin_pki / "ca.pem"),
    }
    del oauth_options["subscribe"]
    with (
        SaslRelayBroker(
            mechanisms=("AWS_MSK_IAM",),
            check_token=check_msk_payload,
            session_lifetime_ms=SESSION_MS,
        ) as msk,
        tansu_behind(msk) as tansu,
    ):
        msk_options = {
            "kafka.bootstrap.servers": msk.bootstrap,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "AWS_MSK_IAM",
            "kafka.sasl.jaas.config": f"{IAM_MODULE} required;",
            "kafka.sasl.client.callback.handler.class": (
                "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
            ),
        }
        spec = {
            "oauth": _prepare(oauth_options, "oauth", tmp_path),
            "msk": _prepare(msk_options, "msk", tmp_path, broker=tansu),
        }
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
            ),
        )
        log = tmp_path / "child.log"
        with open(log, "w") as stderr:
            child = subprocess.run(
                [sys.executable, "-m", "tests.helpers.sasl_spark_child", json.dumps(spec)],
                cwd=REPO,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=stderr,
                timeout=540,
            )
        child_log = log.read_text()
        assert child.returncode == 0, child_log[-3000:]
        results = json.loads(child.stdout.strip().splitlines()[-1])
        assert msk.bearer and msk.expired_sessions == 0
        assert {0, 1} <= set(msk.relayed)  # Produce and Fetch reached Tansu
        assert 22 in msk.relayed  # InitProducerId: the transactional stream
        assert all(check_msk_payload(payload) is None for _, payload in msk.bearer)
        # each MSK sign-in is signed when it happens, not once
        assert len({payload["x-amz-date"] for _, payload in msk.bearer}) > 1
    # Kafka's own tool: the stream committed transactions under its prefix there
    listed = signin_kafka.tool(
        "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server",
        signin_kafka.bootstrap,
        "list",
    ).stdout
    assert any(
        line.startswith("sasl-oauth") and "CompleteCommit" in line for line in listed.splitlines()
    ), listed
    assert "== Physical Plan ==" in child.stdout  # the plans were printed, and hold no secret
    assert CLIENT_SECRET not in child.stdout + child_log
    assert SECRET not in child.stdout + child_log
    for name in ("oauth", "msk"):
        expected = [f"{name}-{i:03d}" for i in range(51)]
        assert results[name]["read"] == expected
        assert results[name]["stream_error"] is None
        assert results[name]["streamed"] == expected
