"""Options are data, not code (issue 31): tests that play the attacker.

Each case a hostile option writer, registry or token endpoint tries is refused with an
error naming the option and the allow-list to change, and is checked from outside: the
marker file a callback would create, the file a registry's reference name would write, the
request a local HTTP server must not receive, the redirected host that must not see the
client secret. Allowed uses (the operator's ``PYKAFKA_ALLOWED_URLS`` /
``PYKAFKA_ALLOWED_CALLBACKS``, or an installed package's entry point) still work. Then the
sign-in that must neither stall (a token refresh while the identity provider is down) nor
storm (AWS credentials looked up per broker connection).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import sys
import textwrap
import threading
import time

import pytest

from kafka_common import trust
from kafka_common.oauth.sources import ClientCredentials, TokenCallback
from kafka_common.oauth.tokens import TOKEN_CACHE, RefreshPolicy, TokenCache
from kafka_source.options import parse_reader_options
from protocol.config import Secret
from protocol.errors import AuthenticationError, ConfigError

from .helpers.schema_registry_server import RegistryServer
from .helpers.tokens import jwt
from .helpers.secrets import assert_no_secret
from .helpers.waiting import wait_until
from .helpers.trust_env import allow_callbacks, allow_urls

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
HANDLER_OPTION = "kafka.sasl.login.callback.handler.class"
ENDPOINT_OPTION = "kafka.sasl.oauthbearer.token.endpoint.url"
CLIENT_SECRET = "Cl13nt-s3cret-XYZ"


@pytest.fixture(autouse=True)
def operator_lists_unset(monkeypatch):
    """Each test starts as a cluster whose operator set neither list."""
    monkeypatch.delenv(trust.URLS_ENV, raising=False)
    monkeypatch.delenv(trust.CALLBACKS_ENV, raising=False)
    TOKEN_CACHE.clear()
    yield
    TOKEN_CACHE.clear()


def reader(broker: str = "127.0.0.1:1", **options):
    base = {
        "kafka.bootstrap.servers": broker,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.request.timeout.ms": "3000",
    }
    return parse_reader_options({**base, **options}).client_config


def client_credentials(endpoint: str) -> dict:
    return {
        HANDLER_OPTION: HANDLER,
        ENDPOINT_OPTION: endpoint,
        "kafka.sasl.jaas.config": f"{MODULE} required clientId='app' "
        f"clientSecret='{CLIENT_SECRET}' scope='kafka';",
    }


def a_token(lifetime: float = 3600, sub: str = "app") -> str:
    now = time.time()
    return jwt({"sub": sub, "iat": int(now), "exp": int(now + lifetime)})


# ---- a tiny HTTP server that records what reaches it ----------------------------------------


class Http:
    """An HTTP server on 127.0.0.1: ``answer(handler)`` answers each request; every request
    (method, path, headers) is kept in ``seen``."""

    def __init__(self, answer):
        self.seen: list[tuple[str, str, dict]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append((self.command, self.path, dict(self.headers)))
                answer(self)

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def json_answer(handler, body: dict, status: int = 200):
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.fixture
def servers():
    started: list[Http] = []

    def start(answer) -> Http:
        started.append(Http(answer))
        return started[-1]

    yield start
    for s in started:
        s.close()


class Listener:
    """A TCP port that counts the connections made to it (a broker that must not be
    reached)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.bootstrap = f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def connections(self) -> int:
        """The connections made so far, also those not yet accepted: the kernel completes a
        connection to a listening port before ``connect()`` returns, so once the counting
        thread stopped, the backlog holds every one made, with no wait."""
        self._stop.set()
        self._thread.join(5)
        self.sock.setblocking(False)
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return self.accepted
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop.set()
        self.sock.close()


# ---- case 1: an option that names a function runs nothing ----------------------------------


def test_a_callback_option_naming_os_system_runs_no_command(tmp_path):
    marker = tmp_path / "ran"
    options = {
        HANDLER_OPTION: "os:system",
        "kafka.sasl.oauthbearer.config": f"touch {marker}",
        "kafka.sasl.jaas.config": f"{MODULE} required;",
    }
    with pytest.raises(trust.NotAllowedError) as info:
        reader(**options)
    message = str(info.value)
    assert HANDLER_OPTION in message and "'os:system'" in message
    assert trust.CALLBACKS_ENV in message and trust.CALLBACK_ENTRY_POINTS in message
    # an executor handed the source anyway (its own environment decides) runs nothing too
    with pytest.raises(trust.NotAllowedError, match=trust.CALLBACKS_ENV):
        TokenCallback("os:system", Secret(f"touch {marker}")).fetch()
    assert not marker.exists()


def test_a_callback_module_is_not_even_imported_unless_allowed(tmp_path, monkeypatch):
    """Importing runs a module's code: the check comes first."""
    marker = tmp_path / "imported"
    (tmp_path / "hostile_cb_mod.py").write_text(
        textwrap.dedent(f"""
        open({str(marker)!r}, "w").close()
        def token(config):
            import time
            return {a_token()!r}, time.time() + 3600
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    options = {
        HANDLER_OPTION: "hostile_cb_mod:token",
        "kafka.sasl.jaas.config": f"{MODULE} required;",
    }
    with pytest.raises(trust.NotAllowedError):
        reader(**options)
    assert not marker.exists() and "hostile_cb_mod" not in sys.modules
    allow_callbacks(monkeypatch, "hostile_cb_mod:token")  # the operator allows it: it works
    try:
        mech = reader(**options).sasl_mechanism_factory("127.0.0.1")
        assert mech.initial_response().startswith(b"n,,\x01auth=Bearer ")
        assert marker.exists()
    finally:
        sys.modules.pop("hostile_cb_mod", None)


def test_an_installed_packages_entry_point_allows_its_callback(tmp_path, monkeypatch):
    """Installing a package is the operator's act: a callback it declares under the
    connector's entry-point group needs no variable."""
    (tmp_path / "corp_token_cb.py").write_text(
        textwrap.dedent(f"""
        def token(config):
            import time
            return {a_token(sub="corp")!r}, time.time() + 3600, "corp"
        """)
    )
    dist = tmp_path / "corp_token_cb-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: corp-token-cb\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{trust.CALLBACK_ENTRY_POINTS}]\ncorp = corp_token_cb:token\n"
    )
    options = {
        HANDLER_OPTION: "corp_token_cb:token",
        "kafka.sasl.jaas.config": f"{MODULE} required;",
    }
    with pytest.raises(trust.NotAllowedError):
        reader(**options)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        factory = reader(**options).sasl_mechanism_factory
        assert TOKEN_CACHE.get(factory.source, factory.policy).principal == "corp"
    finally:
        sys.modules.pop("corp_token_cb", None)


# ---- case 2: a registry's reference names never become paths outside a private folder -----

PROTO_REF = 'syntax = "proto3";\npackage evil;\nmessage Payload { string x = 1; }\n'


@pytest.mark.parametrize(
    "name_of",
    [
        lambda target: "../" * 12 + str(target).lstrip("/"),  # climbs out of the temp folder
        lambda target: str(target),  # an absolute name
        lambda target: "C:/Windows/" + target.name,  # a drive letter
        lambda target: "ok/../../" + target.name,  # .. inside the name
    ],
)
def test_a_hostile_registrys_reference_names_write_no_file(tmp_path, name_of):
    pytest.importorskip("grpc_tools")
    from kafka_common.protobuf.compile import message_descriptor
    from kafka_common.schema_registry import RegistryClient, registry_settings
    from kafka_common.option_map import OptionMap

    target = tmp_path / "pwned.proto"
    name = name_of(target)
    registry = RegistryServer().start()
    try:
        registry.register("evil-ref", {"schema": PROTO_REF, "schemaType": "PROTOBUF"})
        main = f'syntax = "proto3";\nimport "{name}";\nmessage Top {{ evil.Payload p = 1; }}\n'
        registry.register(
            "top",
            {
                "schema": main,
                "schemaType": "PROTOBUF",
                "references": [{"name": name, "subject": "evil-ref", "version": 1}],
            },
        )
        client = RegistryClient(registry_settings(OptionMap({"schema.registry.url": registry.url})))
        found = client.version("top")
        refs = tuple((n, r.text) for n, r in client.referenced(found).items())
        with pytest.raises(ConfigError, match="reference name") as info:
            message_descriptor(found.text, refs)
    finally:
        registry.stop()
    assert "not a safe relative file name" in str(info.value)
    assert not target.exists() and not os.path.exists("/pwned.proto")


def test_reference_names_that_are_safe_still_compile():
    pytest.importorskip("grpc_tools")
    from kafka_common.protobuf.compile import message_descriptor

    main = (
        'syntax = "proto3";\nimport "corp/evil/payload.proto";\n'
        "message Top { evil.Payload p = 1; }\n"
    )
    top = message_descriptor(main, (("corp/evil/payload.proto", PROTO_REF),))
    assert top.fields_by_name["p"].message_type.full_name == "evil.Payload"


# ---- case 3: file: and http(s) URLs an option names ------------------------------------------


def test_a_file_token_url_is_neither_read_nor_sent_unless_allowed(tmp_path, monkeypatch):
    """A Kubernetes service-account token looks like a JWT: with the file's URL as the
    token endpoint it would go to whatever broker the options name."""
    secret_file = tmp_path / "serviceaccount-token"
    stolen = a_token(sub="system:serviceaccount:prod:spark")
    secret_file.write_text(stolen)
    broker = Listener()
    try:
        options = {
            HANDLER_OPTION: HANDLER,
            ENDPOINT_OPTION: secret_file.as_uri(),
            "kafka.sasl.jaas.config": f"{MODULE} required;",
        }
        with pytest.raises(trust.NotAllowedError) as info:
            reader(broker.bootstrap, **options)
        assert broker.connections() == 0
    finally:
        broker.close()
    message = str(info.value)
    assert ENDPOINT_OPTION in message and secret_file.as_uri() in message
    assert trust.URLS_ENV in message
    assert_no_secret(info.value, secrets=[stolen])
    allow_urls(monkeypatch, f"file:{secret_file}")  # file:/p names the same as file:///p
    factory = reader(**options).sasl_mechanism_factory
    assert TOKEN_CACHE.get(factory.source, factory.policy).value.reveal() == stolen


def test_a_token_endpoint_on_an_internal_host_gets_no_request(servers, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    internal = servers(lambda h: json_answer(h, {"access_token": a_token()}))
    with pytest.raises(trust.NotAllowedError) as info:
        reader(**client_credentials(internal.url + "/token"))
    assert internal.seen == []
    assert ENDPOINT_OPTION in str(info.value) and trust.URLS_ENV in str(info.value)
    # an executor whose operator did not allow it refuses too, before any request
    source = ClientCredentials(internal.url + "/token", "app", Secret(CLIENT_SECRET))
    with pytest.raises(trust.NotAllowedError):
        source.fetch()
    assert internal.seen == []
    allow_urls(monkeypatch, "https://idp.example/token")  # another URL: still refused
    with pytest.raises(trust.NotAllowedError, match="the operator must add"):
        reader(**client_credentials(internal.url + "/token"))
    assert internal.seen == []
    assert_no_secret(info.value, secrets=[CLIENT_SECRET])
    assert CLIENT_SECRET not in caplog.text
    allow_urls(monkeypatch, internal.url + "/token")
    factory = reader(**client_credentials(internal.url + "/token")).sasl_mechanism_factory
    assert TOKEN_CACHE.get(factory.source, factory.policy).principal == "app"
    assert [(m, p) for m, p, _ in internal.seen] == [("POST", "/token")]


def test_registry_urls_are_allowed_until_the_operator_lists_urls(servers, monkeypatch):
    from kafka_common.option_map import OptionMap
    from kafka_common.schema_registry import RegistryClient, registry_settings
    from kafka_common.schema_registry.settings import RegistrySettings

    registry = servers(lambda h: json_answer(h, [1]))
    opts = OptionMap(
        {"schema.registry.url": registry.url, "schema.registry.basic.auth.user.info": "u:Reg-pa55"}
    )
    assert RegistryClient(registry_settings(opts)).versions("s") == [1]
    allow_urls(monkeypatch, "http://registry.example:8081")
    with pytest.raises(trust.NotAllowedError) as info:
        registry_settings(opts)
    assert "schema.registry.url" in str(info.value) and trust.URLS_ENV in str(info.value)
    assert_no_secret(info.value, secrets=["Reg-pa55"])
    # settings the driver made, used by an executor whose operator lists other URLs
    settings = RegistrySettings(urls=(registry.url,))
    before = len(registry.seen)
    with pytest.raises(trust.NotAllowedError):
        RegistryClient(settings).versions("s")
    assert len(registry.seen) == before


# ---- case 4: a redirect never carries the credentials elsewhere -----------------------------


def test_a_token_endpoint_redirect_is_not_followed(servers, monkeypatch):
    elsewhere = servers(lambda h: json_answer(h, {"access_token": a_token(sub="evil")}))

    def redirect(h):
        h.send_response(302)
        h.send_header("Location", elsewhere.url + "/steal")
        h.send_header("Content-Length", "0")
        h.end_headers()

    endpoint = servers(redirect)
    allow_urls(monkeypatch, endpoint.url + "/token")
    factory = reader(**client_credentials(endpoint.url + "/token")).sasl_mechanism_factory
    with pytest.raises(AuthenticationError) as info:
        factory("127.0.0.1")
    message = str(info.value)
    assert ENDPOINT_OPTION in message and "redirect" in message and "302" in message
    assert elsewhere.seen == []  # neither the POST nor the Basic header went there
    assert [p for _, p, _ in endpoint.seen] == ["/token"]
    assert "Basic" in endpoint.seen[0][2]["Authorization"]
    assert_no_secret(info.value, secrets=[CLIENT_SECRET])


def test_a_registry_redirect_is_not_followed(servers):
    from kafka_common.option_map import OptionMap
    from kafka_common.schema_registry import RegistryClient, RegistryError, registry_settings

    elsewhere = servers(lambda h: json_answer(h, [1]))

    def redirect(h):
        h.send_response(307)
        h.send_header("Location", elsewhere.url + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()

    registry = servers(redirect)
    client = RegistryClient(
        registry_settings(
            OptionMap(
                {
                    "schema.registry.url": registry.url,
                    "schema.registry.basic.auth.user.info": "u:Reg-pa55",
                }
            )
        )
    )
    with pytest.raises(RegistryError, match="redirects are not followed") as info:
        client.versions("s")
    assert elsewhere.seen == [] and len(registry.seen) == 1
    assert_no_secret(info.value, secrets=["Reg-pa55"])


# ---- bounded answers ------------------------------------------------------------------------


def test_a_token_endpoint_that_sends_too_much_or_drips_is_cut_off(servers, monkeypatch):
    def huge(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        h.wfile.write(b'{"access_token": "' + b"a" * (2 << 20) + b'"}')

    def drip(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        try:
            for _ in range(200):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.1)  # the server's drip: the slow answer under test
        except OSError:
            pass

    big, slow = servers(huge), servers(drip)
    allow_urls(monkeypatch, big.url + "/token", slow.url + "/token")
    with pytest.raises(AuthenticationError, match="more than"):
        ClientCredentials(big.url + "/token", "app", Secret(CLIENT_SECRET)).fetch()
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="could not be reached"):
        ClientCredentials(
            slow.url + "/token",
            "app",
            Secret(CLIENT_SECRET),
            read_timeout_ms=1000,
            connect_timeout_ms=1000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=50,
        ).fetch()
    assert time.monotonic() - started < 12  # not 200 drips of 0.1 s (20 s)


# ---- secrets in the clear -------------------------------------------------------------------


def test_secrets_in_the_clear_are_warned_about_once_never_quoted(servers, monkeypatch, caplog):
    from kafka_common import option_map
    from kafka_common.option_map import OptionMap
    from kafka_common.schema_registry import registry_settings

    monkeypatch.setattr(option_map, "_warned", set())
    caplog.set_level(logging.WARNING)
    allow_urls(monkeypatch, "http://idp.internal/token", "http://registry:8081")
    for _ in range(2):
        reader(**client_credentials("http://idp.internal/token"))
        registry_settings(
            OptionMap(
                {
                    "schema.registry.url": "http://registry:8081",
                    "schema.registry.basic.auth.user.info": "u:Reg-pa55",
                }
            )
        )
        parse_reader_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:1",
                "subscribe": "t",
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
            }
        )
    text = caplog.text
    assert text.count("client secret goes to the token endpoint in the clear") == 1
    assert text.count("registry credentials") == 1
    assert text.count("AWS_MSK_IAM over SASL_PLAINTEXT") == 1
    assert CLIENT_SECRET not in text and "Reg-pa55" not in text


# ---- sign-in that does not stall ------------------------------------------------------------


def test_a_down_identity_provider_does_not_stall_reconnections(servers, monkeypatch):
    """The token is due for refresh (80% of its life) but valid for minutes more; the
    identity provider now hangs: a reconnection signs in with the cached token at once
    (today it waited out every retry under a lock), and the refresh lands when the
    provider is back."""
    state = {"down": False, "n": 0}

    def idp(h):
        if state["down"]:
            time.sleep(2.5)  # the hanging provider under test
            json_answer(h, {"error": "unavailable"}, status=503)
            return
        state["n"] += 1
        json_answer(h, {"access_token": a_token(sub=f"app-{state['n']}")})

    server = servers(idp)
    allow_urls(monkeypatch, server.url + "/token")
    source = ClientCredentials(
        server.url + "/token",
        "app",
        Secret(CLIENT_SECRET),
        read_timeout_ms=2000,
        connect_timeout_ms=2000,
        retry_backoff_ms=1000,
        retry_backoff_max_ms=2000,
    )
    now = [time.time()]
    cache = TokenCache(clock=lambda: now[0])
    policy = RefreshPolicy()
    first = cache.get(source, policy)
    assert first.principal == "app-1"
    state["down"] = True
    now[0] += 0.9 * 3600  # due, still valid for 6 minutes
    started = time.monotonic()
    assert cache.get(source, policy) is first
    assert time.monotonic() - started < 2.0
    started = time.monotonic()
    for _ in range(3):  # more reconnections while the refresh is failing: no wait at all
        assert cache.get(source, policy) is first
    assert time.monotonic() - started < 1.5  # not one 2 s read timeout
    state["down"] = False

    def refreshed():  # the failed refresh is tried again, on the clock's next step
        now[0] += 11
        token = cache.get(source, policy)
        return token if token is not first else None

    assert wait_until(refreshed, 20, "the refresh landing", interval=0.3).principal == "app-2"


def test_with_no_valid_token_a_down_identity_provider_is_an_error(servers, monkeypatch):
    server = servers(lambda h: json_answer(h, {"error": "unavailable"}, status=503))
    allow_urls(monkeypatch, server.url + "/token")
    source = ClientCredentials(
        server.url + "/token",
        "app",
        Secret(CLIENT_SECRET),
        retry_backoff_ms=50,
        retry_backoff_max_ms=100,
    )
    with pytest.raises(AuthenticationError, match="could not be reached"):
        TokenCache().get(source, RefreshPolicy())


# ---- sign-in that does not storm: AWS credentials ------------------------------------------


def _credential_process(tmp_path, monkeypatch, expires_in_s: float):
    """A botocore profile whose credentials come from a process (as SSO or a vault
    helper); each run of the process leaves a line in the returned file."""
    runs = tmp_path / "runs"
    script = tmp_path / "creds.py"
    script.write_text(
        textwrap.dedent(f"""
        import datetime, json
        open({str(runs)!r}, "a").write("run\\n")
        expiry = (datetime.datetime.now(datetime.timezone.utc)
                  + datetime.timedelta(seconds={expires_in_s}))
        print(json.dumps({{"Version": 1, "AccessKeyId": "ASIAPROC", "SecretAccessKey":
                          "proc-secret", "SessionToken": "proc-token",
                          "Expiration": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    )
    config = tmp_path / "config"
    config.write_text(f"[profile msk]\ncredential_process = {sys.executable} {script}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    return runs


def test_msk_iam_looks_credentials_up_once_not_per_connection(tmp_path, monkeypatch):
    pytest.importorskip("botocore")
    from kafka_common.aws_msk_iam.credentials import MskCredentials
    from kafka_common.aws_msk_iam.options import MskIamFactory

    runs = _credential_process(tmp_path, monkeypatch, expires_in_s=7200)
    factory = MskIamFactory(MskCredentials(profile="msk"))
    for _ in range(5):  # five broker connections
        factory("b-1.c.kafka.eu-west-1.amazonaws.com")
    assert runs.read_text().count("run") == 1


def test_an_msk_oauth_token_ends_when_its_credentials_do(tmp_path, monkeypatch):
    pytest.importorskip("botocore")
    from kafka_common.aws_msk_iam.credentials import MskCredentials
    from kafka_common.aws_msk_iam.options import MskOAuthSource

    _credential_process(tmp_path, monkeypatch, expires_in_s=720)  # 12 min < 15 min
    token = MskOAuthSource(MskCredentials(profile="msk"), "eu-west-1").fetch()
    assert token.expires_at <= time.time() + 720
    assert token.expires_at > time.time() + 600


# ---- the trust module's own rules -----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "../x.proto",
        "/etc/x.proto",
        "C:x.proto",
        "a\\b.proto",
        "a//b.proto",
        "./a.proto",
        "",
        "a/../../b.proto",
    ],
)
def test_unsafe_relative_names(name):
    with pytest.raises(ConfigError):
        trust.safe_relative_path(name, "ref")


def test_wildcards_are_refused_and_file_urls_of_other_hosts_too(monkeypatch):
    allow_urls(monkeypatch, "https://idp.example/*")
    with pytest.raises(trust.NotAllowedError, match="wildcards are not supported"):
        trust.check_url("https://idp.example/token", ENDPOINT_OPTION, "token endpoint")
    with pytest.raises(trust.NotAllowedError, match="another host"):
        trust.check_url("file://fileserver/share/token", ENDPOINT_OPTION, "token file")
