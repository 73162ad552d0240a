"""AWS MSK IAM with no jar: our SigV4 signatures against botocore's, byte for byte, for fixed
credentials and a frozen clock, for both ways of signing in (the AWS_MSK_IAM payload and
the OAUTHBEARER presigned-URL token); then sign-ins through the scripted broker, which
recomputes each signature with botocore and refuses a wrong one; the credential sources
(environment, profile, STS AssumeRole against a local endpoint that checks the request's
signature with botocore).
"""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import json
import threading
import urllib.parse

import pytest

botocore = pytest.importorskip("botocore")
from botocore.auth import SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from kafka_common.aws_msk_iam.credentials import MskCredentials  # noqa: E402
from kafka_common.oauth.tokens import TOKEN_CACHE  # noqa: E402
from kafka_source.options import parse_reader_options  # noqa: E402
from protocol.client.cluster import KafkaClient  # noqa: E402
from protocol.config import Secret  # noqa: E402
from protocol.errors import AuthenticationError, ConfigError  # noqa: E402
from protocol.sasl_aws_msk_iam import (  # noqa: E402
    AwsCredentials,
    msk_iam_payload,
    msk_oauth_token,
    region_from_host,
)

from .helpers.fake_sasl_broker import FakeSaslBroker  # noqa: E402
from .helpers.msk_iam import (  # noqa: E402
    KEY,
    SECRET,
    SESSION,
    botocore_presign,
    check_msk_payload,
)

WHEN = dt.datetime(2026, 11, 24, 5, 30, 0, tzinfo=dt.timezone.utc)
HOST = "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com"
UA = "pyspark-pykafka/0.1.0"
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    TOKEN_CACHE.clear()
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_STS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield
    TOKEN_CACHE.clear()


def ours(token: bool) -> AwsCredentials:
    return AwsCredentials(KEY, Secret(SECRET), Secret(SESSION) if token else None)


@pytest.mark.parametrize("token", [False, True])
def test_oauth_token_equals_botocores_byte_for_byte(token):
    """As AWS's Python signer: presign with botocore, append User-Agent, base64url."""
    request = botocore_presign("https://kafka.eu-west-1.amazonaws.com/", "eu-west-1", WHEN, token)
    request.params = {"User-Agent": UA}
    url = request.prepare().url
    expected = base64.urlsafe_b64encode(url.encode()).rstrip(b"=").decode()
    assert msk_oauth_token(ours(token), "eu-west-1", WHEN, UA) == expected


@pytest.mark.parametrize("token", [False, True])
def test_msk_iam_payload_signature_equals_botocores(token):
    request = botocore_presign(f"https://{HOST}/", "eu-west-1", WHEN, token)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
    payload = json.loads(msk_iam_payload(ours(token), HOST, "eu-west-1", WHEN, UA))
    expected = {k.lower(): v for k, v in query.items()}
    expected.update(version="2020_10_22", host=HOST, **{"user-agent": UA})
    assert payload == expected
    assert payload["x-amz-signature"] == query["X-Amz-Signature"]


def test_region_comes_from_the_broker_host():
    assert region_from_host(HOST) == "eu-west-1"
    assert (
        region_from_host("boot-abc.c1.kafka-serverless.us-gov-west-1.amazonaws.com")
        == "us-gov-west-1"
    )
    assert region_from_host("127.0.0.1") is None


# ---- the scripted broker recomputes every signature with botocore --------------------------


def check_msk_oauth(token: str, _extensions) -> dict | None:
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    when = dt.datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=dt.timezone.utc
    )
    region = query["X-Amz-Credential"].split("/")[2]
    request = botocore_presign(
        f"https://kafka.{region}.amazonaws.com/", region, when, "X-Amz-Security-Token" in query
    )
    signed = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
    if query["X-Amz-Signature"] != signed["X-Amz-Signature"]:
        return {"status": "invalid_token"}
    return None


def reader(bootstrap: str, **options):
    base = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.request.timeout.ms": "3000",
    }
    base.update(options)
    return parse_reader_options(base).client_config


def test_aws_msk_iam_signs_in_with_env_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # 127.0.0.1 names no region
    with FakeSaslBroker(
        {}, mechanisms=("AWS_MSK_IAM",), topics={"t": 2}, check_token=check_msk_payload
    ) as fake:
        config = reader(
            fake.bootstrap,
            **{
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
                "kafka.sasl.jaas.config": f"{IAM_MODULE} required;",
                "kafka.sasl.client.callback.handler.class": (
                    "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
                ),
            },
        )
        with KafkaClient(config) as client:
            assert client.partitions_for("t") == [0, 1]
    ((_, payload),) = fake.bearer
    assert (
        payload["host"] == "127.0.0.1"
        and "/eu-west-1/kafka-cluster/" in payload["x-amz-credential"]
    )


def test_aws_msk_iam_wrong_secret_is_refused_naming_the_profile(tmp_path, monkeypatch):
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[msk]\naws_access_key_id = {KEY}\naws_secret_access_key = not-the-right-secret\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with FakeSaslBroker(
        {}, mechanisms=("AWS_MSK_IAM",), topics={"t": 1}, check_token=check_msk_payload
    ) as fake:
        config = reader(
            fake.bootstrap,
            **{
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
                "kafka.sasl.jaas.config": f'{IAM_MODULE} required awsProfileName="msk";',
            },
        )
        with pytest.raises(AuthenticationError) as info:
            KafkaClient(config).refresh_metadata()
    assert "signature mismatch" in str(info.value) and "awsProfileName msk" in str(info.value)
    assert "not-the-right-secret" not in str(info.value)


def test_oauthbearer_with_the_msk_callback_handler(tmp_path, monkeypatch):
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[msk]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    with FakeSaslBroker(
        {}, mechanisms=("OAUTHBEARER",), topics={"t": 1}, check_token=check_msk_oauth
    ) as fake:
        config = reader(
            fake.bootstrap,
            **{
                "kafka.sasl.mechanism": "OAUTHBEARER",
                "kafka.sasl.jaas.config": f'{OAUTH_MODULE} required awsProfileName="msk";',
                "kafka.sasl.login.callback.handler.class": (
                    "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
                ),
            },
        )
        with KafkaClient(config) as client:
            assert client.partitions_for("t") == [0]
    ((token, _),) = fake.bearer
    url = base64.urlsafe_b64decode(token + "==").decode()
    assert url.startswith("https://kafka.us-east-2.amazonaws.com/?Action=kafka-cluster%3AConnect")
    assert "X-Amz-Expires=900" in url and url.endswith(
        "&User-Agent=" + urllib.parse.quote(UA, safe="")
    )


def test_option_errors(monkeypatch):
    with pytest.raises(ConfigError, match="IAMLoginModule"):
        reader(
            "127.0.0.1:1",
            **{
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
                "kafka.sasl.jaas.config": f"{OAUTH_MODULE} required;",
            },
        )
    with pytest.raises(ConfigError, match="awsRegion"):
        reader(
            "127.0.0.1:1",
            **{
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
                "kafka.sasl.jaas.config": f'{IAM_MODULE} required awsRegion="x";',
            },
        )


# ---- STS AssumeRole against a local endpoint that checks the signature -------------------


class _Sts(http.server.BaseHTTPRequestHandler):
    calls: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        request = AWSRequest(
            method="POST",
            url=f"http://{self.headers['Host']}/",
            data=body,
            headers={
                "Content-Type": self.headers["Content-Type"],
                "X-Amz-Date": self.headers["X-Amz-Date"],
            },
        )
        request.context["timestamp"] = self.headers["X-Amz-Date"]
        auth = SigV4Auth(Credentials(KEY, SECRET), "sts", "eu-west-1")
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        form = dict(urllib.parse.parse_qsl(body))
        ok = self.headers["Authorization"].endswith(f"Signature={expected}")
        _Sts.calls.append((ok, form))
        answer = (
            '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleResult><Credentials><AccessKeyId>ASIAROLE</AccessKeyId>"
            "<SecretAccessKey>role-secret</SecretAccessKey><SessionToken>role-token"
            "</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>"
            "</AssumeRoleResult></AssumeRoleResponse>"
        )
        self.send_response(200 if ok else 403)
        self.send_header("Content-Type", "text/xml")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args):
        pass


def test_assume_role_signs_its_request_and_returns_the_role_credentials(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Sts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{server.server_port}/")
        monkeypatch.setenv("PYKAFKA_ALLOWED_URLS", f"http://127.0.0.1:{server.server_port}/")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        _Sts.calls.clear()
        creds = MskCredentials(
            role_arn="arn:aws:iam::123456789012:role/msk",
            sts_region="eu-west-1",
            role_session_name="s1",
        ).resolve()
    finally:
        server.shutdown()
        server.server_close()
    ((ok, form),) = _Sts.calls
    assert ok and form["Action"] == "AssumeRole" and form["RoleSessionName"] == "s1"
    assert form["RoleArn"] == "arn:aws:iam::123456789012:role/msk"
    assert creds.access_key_id == "ASIAROLE" and creds.session_token.reveal() == "role-token"
    assert "role-secret" not in repr(creds)


@pytest.mark.parametrize(
    "answer, error",
    [
        (b"\xff", "ProtocolError"),
        (b"not json", "ProtocolError"),
        (b"[]", "AuthenticationError"),
        (b'{"version": "1999"}', "AuthenticationError"),
        (b"{" + b" " * 9000 + b"}", "ProtocolError"),
    ],
)
def test_a_hostile_msk_answer_is_a_typed_error(answer, error):
    from protocol.sasl_aws_msk_iam import AwsMskIamMechanism

    mech = AwsMskIamMechanism(b"{}")
    mech.initial_response()
    with pytest.raises(Exception) as info:
        mech.respond(answer)
    assert type(info.value).__name__ == error
