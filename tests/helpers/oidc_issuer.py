"""A real OIDC token issuer for the OAUTHBEARER tests, and the broker's check of its tokens.

``OidcIssuer`` installs (once, ``npm ci`` from ``tests/oidc_issuer/package-lock.json``) and
starts ``tests/oidc_issuer/issuer.mjs`` -- the npm package oauth2-mock-server on a free
loopback port, issuing RS256 client-credentials tokens and publishing its JWKS -- with the
clients it is given. ``check(token, extensions)`` is what a Kafka broker's
OAuthBearerValidatorCallbackHandler does with a token: the RS256 signature against the
issuer's JWKS (``kid`` chosen), ``exp``/``nbf`` against the clock, the issuer, and the
scope the broker requires; it returns None, or the JSON status a broker sends.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "oidc_issuer")
_INSTALL_LOCK = threading.Lock()


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ensure_installed() -> None:
    """``npm ci`` in tests/oidc_issuer unless its node_modules already hold the package."""
    with _INSTALL_LOCK:
        if os.path.isdir(os.path.join(HERE, "node_modules", "oauth2-mock-server")):
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "the OIDC issuer of the tests needs node and npm (apt-get install nodejs npm)"
            )
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=HERE,
            check=True,
            timeout=300,
        )


class OidcIssuer:
    def __init__(self, clients: dict[str, dict], *, token_ttl_s: int = 3600) -> None:
        self.clients, self.token_ttl_s = clients, token_ttl_s
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> OidcIssuer:
        ensure_installed()
        env = dict(
            os.environ, OIDC_CLIENTS=json.dumps(self.clients), OIDC_TOKEN_TTL=str(self.token_ttl_s)
        )
        self._process = subprocess.Popen(
            ["node", os.path.join(HERE, "issuer.mjs")],
            cwd=HERE,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self._read_line(timeout_s=60)
        self.issuer = json.loads(line)["issuer"]
        port = self.issuer.rsplit(":", 1)[1].rstrip("/")
        self.base = f"http://127.0.0.1:{port}"
        self.token_endpoint = f"{self.base}/token"
        self.jwks_endpoint = f"{self.base}/jwks"
        with urllib.request.urlopen(self.jwks_endpoint, timeout=10) as response:
            self.jwks = json.load(response)["keys"]
        return self

    def _read_line(self, timeout_s: float) -> str:
        result: list[str] = []
        reader = threading.Thread(
            target=lambda: result.append(self._process.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(timeout_s)
        if not result or not result[0]:
            self.__exit__()
            raise RuntimeError("the OIDC issuer did not start")
        return result[0]

    def __exit__(self, *exc) -> None:
        process, self._process = self._process, None
        if process is not None:
            try:
                process.stdin.close()
                process.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait(5)

    # ---- the broker's side -----------------------------------------------------------------

    def check(self, token: str, _extensions=None, *, scope: str = "kafka") -> dict | None:
        """None if the token is good; else the JSON status Kafka's broker would send."""
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(_b64(header_b64))
            claims = json.loads(_b64(payload_b64))
        except ValueError:
            return {"status": "invalid_token"}
        key = next((k for k in self.jwks if k.get("kid") == header.get("kid")), None)
        if header.get("alg") != "RS256" or key is None:
            return {"status": "invalid_token"}
        public = rsa.RSAPublicNumbers(
            int.from_bytes(_b64(key["e"]), "big"), int.from_bytes(_b64(key["n"]), "big")
        ).public_key()
        try:
            public.verify(
                _b64(signature_b64),
                f"{header_b64}.{payload_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except Exception:
            return {"status": "invalid_token"}
        now = time.time()
        if claims.get("exp", 0) <= now or claims.get("nbf", 0) > now + 30:
            return {"status": "invalid_token"}
        if claims.get("iss") != self.issuer:
            return {"status": "invalid_token"}
        if scope and scope not in str(claims.get("scope", "")).split():
            return {"status": "insufficient_scope", "scope": scope}
        return None
