"""OAUTHBEARER and AWS_MSK_IAM end to end through Spark, on a real data path.

Each mechanism gets a SASL front (``tests.sasl_relay_broker``) over a Tansu broker that
advertises the front's port: the front signs every connection in -- checking OIDC tokens
against the real issuer's JWKS, or recomputing MSK IAM signatures with botocore -- and
relays everything after to Tansu. A Spark driver in a child process (it needs AWS
credentials and a region in its environment, for its Python workers too) writes a batch,
reads it back, and streams it to a second topic with ``exactlyOnce``, through each front,
with the options a JVM user copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.cluster import KafkaClient

from .broker_setup import create_topic
from .oidc_issuer import OidcIssuer
from .sasl_relay_broker import SaslRelayBroker, tansu_behind
from .test_aws_msk_iam import KEY, SECRET, check_msk_payload
from .test_oauth_oidc import CLIENT, jvm_options
from .test_oauth_oidc import SECRET as CLIENT_SECRET

REPO = Path(__file__).resolve().parent.parent
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
#: KIP-368: the fronts end every SASL session after this long; long-lived connections (the
#: driver's offset reader, the stream's) must sign in again before, or their next request
#: closes the connection (counted in ``expired_sessions``).
SESSION_MS = 4000

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _prepare(front, tansu, options: dict, name: str, tmp_path) -> dict:
    from kafka_source.options import parse_reader_options
    config = parse_reader_options({**options, "subscribe": "x"}).client_config
    with KafkaClient(config) as client:
        for topic in (f"{name}-src", f"{name}-dst"):
            create_topic(tansu, topic, 1, client=client)
    return {"options": options, "source": f"{name}-src", "target": f"{name}-dst",
            "checkpoint": str(tmp_path / f"{name}-checkpoint")}


def test_batch_and_exactly_once_stream_through_oauthbearer_and_msk_iam(tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with OidcIssuer({CLIENT: {"secret": CLIENT_SECRET, "scopes": ["kafka"]}}) as issuer, \
            SaslRelayBroker(mechanisms=("OAUTHBEARER",), check_token=issuer.check,
                            session_lifetime_ms=SESSION_MS) as oauth, \
            SaslRelayBroker(mechanisms=("AWS_MSK_IAM",), check_token=check_msk_payload,
                            session_lifetime_ms=SESSION_MS) as msk, \
            tansu_behind(oauth) as oauth_tansu, tansu_behind(msk) as msk_tansu:
        oauth_options = jvm_options(oauth.bootstrap, issuer.token_endpoint)
        # the operator's allow-list: the child driver, its JVM and Python workers inherit it
        monkeypatch.setenv("PYKAFKA_ALLOWED_URLS", issuer.token_endpoint)
        del oauth_options["subscribe"]
        msk_options = {
            "kafka.bootstrap.servers": msk.bootstrap, "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "AWS_MSK_IAM",
            "kafka.sasl.jaas.config": f"{IAM_MODULE} required;",
            "kafka.sasl.client.callback.handler.class":
                "software.amazon.msk.auth.iam.IAMClientCallbackHandler"}
        spec = {"oauth": _prepare(oauth, oauth_tansu, oauth_options, "oauth", tmp_path),
                "msk": _prepare(msk, msk_tansu, msk_options, "msk", tmp_path)}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        log = tmp_path / "child.log"
        with open(log, "w") as stderr:
            child = subprocess.run([sys.executable, "-m", "tests.sasl_spark_child",
                                    json.dumps(spec)], cwd=REPO, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=stderr, timeout=540)
        child_log = log.read_text()
        assert child.returncode == 0, child_log[-3000:]
        results = json.loads(child.stdout.strip().splitlines()[-1])
        for front in (oauth, msk):
            assert front.bearer and front.expired_sessions == 0
            assert {0, 1} <= set(front.relayed)  # Produce and Fetch reached Tansu
            assert 22 in front.relayed  # InitProducerId: the transactional stream
        assert all(issuer.check(token) is None for token, _ in oauth.bearer)
        assert all(ext == {"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy9"}
                   for _, ext in oauth.bearer)
        assert all(check_msk_payload(payload) is None for _, payload in msk.bearer)
        # each MSK sign-in is signed when it happens, not once
        assert len({payload["x-amz-date"] for _, payload in msk.bearer}) > 1
    assert "== Physical Plan ==" in child.stdout  # the plans were printed, and hold no secret
    assert CLIENT_SECRET not in child.stdout + child_log
    assert SECRET not in child.stdout + child_log
    for name in ("oauth", "msk"):
        expected = [f"{name}-{i:03d}" for i in range(51)]
        assert results[name]["read"] == expected
        assert results[name]["stream_error"] is None
        assert results[name]["streamed"] == expected
