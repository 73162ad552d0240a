"""Tests of build_ssl_context, with certificates made by trustme and real handshakes."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from protocol.errors import ConfigError
from protocol.client.tls import build_ssl_context

HOSTNAME = "broker-1.kafka.test"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_ctx(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOSTNAME).configure_cert(ctx)
    return ctx


@pytest.fixture
def files(tmp_path: Path, ca: trustme.CA) -> dict[str, str]:
    """The CA bundle and a client certificate/key, as PEM files."""
    client = ca.issue_cert("client@kafka.test")
    paths = {
        "cafile": tmp_path / "ca.pem",
        "certfile": tmp_path / "client.pem",
        "keyfile": tmp_path / "client.key",
    }
    ca.cert_pem.write_to_path(str(paths["cafile"]))
    for blob in client.cert_chain_pems:
        blob.write_to_path(str(paths["certfile"]), append=True)
    client.private_key_pem.write_to_path(str(paths["keyfile"]))
    return {name: str(path) for name, path in paths.items()}


def handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake over a loopback socket pair, the server in a thread; then one byte
    each way. Raises what the client side raised."""
    client_sock, server_sock = socket.socketpair()
    for sock in (client_sock, server_sock):
        sock.settimeout(10)
    server_errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(server_sock, server_side=True) as tls:
                tls.sendall(tls.recv(1))
        except (OSError, ssl.SSLError) as exc:
            server_errors.append(exc)
        finally:
            server_sock.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with client_ctx.wrap_socket(client_sock, server_hostname=hostname) as tls:
            tls.sendall(b"k")
            assert tls.recv(1) == b"k"
    finally:
        client_sock.close()
        thread.join(10)
    assert not thread.is_alive()


# -- defaults and flags -------------------------------------------------------------------


def test_defaults_verify_and_check_hostname(files):
    for ctx in (build_ssl_context(), build_ssl_context(cafile=files["cafile"])):
        assert ctx.verify_mode == ssl.CERT_REQUIRED
        assert ctx.check_hostname is True
        assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_check_hostname_false_keeps_verification(files):
    ctx = build_ssl_context(cafile=files["cafile"], check_hostname=False)
    assert ctx.check_hostname is False
    assert ctx.verify_mode == ssl.CERT_REQUIRED


def test_verify_false_turns_everything_off(files):
    ctx = build_ssl_context(cafile=files["cafile"], verify=False)
    assert ctx.verify_mode == ssl.CERT_NONE
    assert ctx.check_hostname is False


@pytest.mark.parametrize("option", ["verify", "check_hostname"])
@pytest.mark.parametrize("value", ["false", 0, None])
def test_flags_must_be_booleans(option, value):
    with pytest.raises(ConfigError, match=f"kafka.ssl.{option} must be True or False"):
        build_ssl_context(**{option: value})


# -- file errors --------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["cafile", "certfile", "keyfile"])
def test_missing_file_names_option_and_path(files, tmp_path, option):
    missing = str(tmp_path / "nope.pem")
    kwargs = {"certfile": files["certfile"], option: missing}
    with pytest.raises(ConfigError) as info:
        build_ssl_context(**kwargs)
    assert str(info.value) == f"kafka.ssl.{option}: no such file {missing!r}"


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="kafka.ssl.cafile: .* is a directory"):
        build_ssl_context(cafile=tmp_path)


def test_unreadable_file_reported_even_as_root(files, monkeypatch):
    """Root can read a mode-000 file, so simulate the refusal."""
    import protocol.client.tls as tls_module

    def refuse(path, mode="r"):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(tls_module, "open", refuse, raising=False)
    with pytest.raises(ConfigError) as info:
        build_ssl_context(cafile=files["cafile"])
    assert (
        str(info.value) == f"kafka.ssl.cafile: cannot read {files['cafile']!r} (permission denied)"
    )


def test_cafile_without_certificates(tmp_path):
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("this is not a certificate\n")
    with pytest.raises(ConfigError, match="kafka.ssl.cafile: .*bogus.pem.* no usable"):
        build_ssl_context(cafile=bogus)


def test_mismatched_key(files, ca):
    other_key = ca.issue_cert("someone-else.test").private_key_pem
    other_key.write_to_path(files["keyfile"])
    with pytest.raises(ConfigError, match="kafka.ssl.certfile/kafka.ssl.keyfile"):
        build_ssl_context(certfile=files["certfile"], keyfile=files["keyfile"])


@pytest.mark.parametrize("option", ["keyfile", "key_password"])
def test_key_options_need_certfile(files, option):
    value = files["keyfile"] if option == "keyfile" else "pw"
    with pytest.raises(ConfigError, match=f"kafka.ssl.{option} is set without"):
        build_ssl_context(**{option: value})


def test_path_of_wrong_type():
    with pytest.raises(ConfigError, match="kafka.ssl.cafile must be a file path"):
        build_ssl_context(cafile=42)  # type: ignore[arg-type]


# -- encrypted client keys ----------------------------------------------------------------


@pytest.fixture
def encrypted_key(files) -> str:
    key = serialization.load_pem_private_key(Path(files["keyfile"]).read_bytes(), None)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"hunter2-key-pw"),
    )
    Path(files["keyfile"]).write_bytes(pem)
    return files["keyfile"]


@pytest.mark.parametrize("password", ["hunter2-key-pw", b"hunter2-key-pw"])
def test_encrypted_key_with_password(files, encrypted_key, password):
    build_ssl_context(certfile=files["certfile"], keyfile=encrypted_key, key_password=password)


def test_encrypted_key_with_wrong_password(files, encrypted_key):
    with pytest.raises(ConfigError, match="kafka.ssl.key.password") as info:
        build_ssl_context(
            certfile=files["certfile"], keyfile=encrypted_key, key_password="wrong-pw-XYZ"
        )
    assert "wrong-pw-XYZ" not in str(info.value) and "hunter2" not in str(info.value)


def test_encrypted_key_with_overlong_password(files, encrypted_key):
    with pytest.raises(ConfigError, match="kafka.ssl.key.password is too long") as info:
        build_ssl_context(
            certfile=files["certfile"], keyfile=encrypted_key, key_password="Q" * 5000
        )
    assert "QQQQ" not in str(info.value)


def test_encrypted_key_without_password_never_prompts(files, encrypted_key):
    with pytest.raises(ConfigError, match="encrypted; set kafka.ssl.key.password"):
        build_ssl_context(certfile=files["certfile"], keyfile=encrypted_key)


# -- real handshakes ----------------------------------------------------------------------


def test_handshake_succeeds_for_the_right_hostname(files, server_ctx):
    handshake(build_ssl_context(cafile=files["cafile"]), server_ctx, HOSTNAME)


def test_handshake_fails_for_a_wrong_hostname(files, server_ctx):
    with pytest.raises(ssl.SSLCertVerificationError, match="[Hh]ostname mismatch"):
        handshake(build_ssl_context(cafile=files["cafile"]), server_ctx, "evil.kafka.test")


def test_check_hostname_false_accepts_a_wrong_hostname(files, server_ctx):
    handshake(
        build_ssl_context(cafile=files["cafile"], check_hostname=False),
        server_ctx,
        "evil.kafka.test",
    )


def test_untrusted_ca_fails_even_without_hostname_check(tmp_path, server_ctx):
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    for check_hostname in (True, False):
        ctx = build_ssl_context(cafile=other, check_hostname=check_hostname)
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            handshake(ctx, server_ctx, HOSTNAME)


def test_system_store_does_not_trust_a_private_ca(server_ctx):
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(build_ssl_context(), server_ctx, HOSTNAME)


def test_verify_false_accepts_an_untrusted_server(server_ctx):
    handshake(build_ssl_context(verify=False), server_ctx, "anything.test")


def test_mutual_tls_with_client_certificate(files, ca):
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOSTNAME).configure_cert(server)
    ca.configure_trust(server)
    server.verify_mode = ssl.CERT_REQUIRED
    client = build_ssl_context(
        cafile=files["cafile"], certfile=files["certfile"], keyfile=files["keyfile"]
    )
    handshake(client, server, HOSTNAME)
    # Without a client certificate the server refuses the connection.
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(build_ssl_context(cafile=files["cafile"]), server, HOSTNAME)
