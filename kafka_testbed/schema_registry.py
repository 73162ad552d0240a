"""A small Schema Registry for tests and for trying the connector on a laptop: an HTTP server
following Confluent's documented REST API
(https://docs.confluent.io/platform/current/schema-registry/develop/api.html), in memory.

It stands in for a real Confluent Schema Registry, which does not install here (it is a JVM
service; Karapace is not on PyPI; npm has only clients), and is started by the tests'
fixtures like the brokers, and by ``python -m kafka_testbed`` for a user. It serves the
endpoints the clients call (confluent-kafka's serializers and deserializers, and the
connector): ``GET /schemas/ids/{id}``, ``GET /schemas/guids/{guid}``,
``GET /schemas/types``, ``GET /subjects``, ``GET /subjects/{s}/versions``,
``GET /subjects/{s}/versions/{v|latest}``, ``POST /subjects/{s}/versions`` (register),
``POST /subjects/{s}`` (look up), ``GET /config[/{s}]``, with Confluent's error shape
(``{"error_code": 40401, "message": ...}``) and codes (40401 subject, 40402 version, 40403
schema not found, 42201 invalid schema), HTTP basic or bearer authentication (401), and for
the fault tests a request log, injectable 5xx answers and an injectable delay. Ids are
global and a schema registered twice keeps its id, as in the real registry; it checks no
compatibility.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


class RegistryServer:
    def __init__(
        self,
        *,
        user_info: str | None = None,
        bearer_token: str | None = None,
        ssl_context=None,
        port: int = 0,
    ):
        """``ssl_context``: a server-side ``ssl.SSLContext`` to serve https instead;
        ``port``: where to listen on 127.0.0.1 (0: any free port)."""
        self.user_info, self.bearer_token = user_info, bearer_token
        self.port = port
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        self.schemas: list[dict] = []  # index = id - 1
        self.subjects: dict[str, list[int]] = {}  # subject -> ids by version
        self.requests: list[tuple[str, str]] = []
        self.failures: list[int] = []  # statuses to answer next, in order
        self.delay_s = 0.0
        self._server: ThreadingHTTPServer | None = None

    # ---- control ------------------------------------------------------------------------

    def start(self) -> RegistryServer:
        registry = self

        class Handler(_Handler):
            pass

        Handler.registry = registry
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        if self.ssl_context is not None:
            self._server.socket = self.ssl_context.wrap_socket(
                self._server.socket, server_side=True
            )
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, count: int, status: int = 503) -> None:
        with self.lock:
            self.failures.extend([status] * count)

    def calls(self, prefix: str = "") -> list[tuple[str, str]]:
        with self.lock:
            return [r for r in self.requests if r[1].startswith(prefix)]

    def reset_calls(self) -> None:
        with self.lock:
            self.requests.clear()

    # ---- the registry -------------------------------------------------------------------

    def register(self, subject: str, body: dict) -> dict:
        key = _key(body)
        with self.lock:
            for i, s in enumerate(self.schemas):
                if _key(s) == key:
                    schema_id = i + 1
                    break
            else:
                self.schemas.append(
                    {
                        "schema": body["schema"],
                        "schemaType": body.get("schemaType", "AVRO"),
                        "references": body.get("references") or [],
                        "guid": str(uuid.uuid4()),
                    }
                )
                schema_id = len(self.schemas)
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return {"id": schema_id, "guid": self.schemas[schema_id - 1]["guid"]}

    def version_body(self, subject: str, version: int) -> dict:
        schema_id = self.subjects[subject][version - 1]
        s = self.schemas[schema_id - 1]
        return _schema_body(s, subject=subject, version=version, id=schema_id)


def _key(body: dict):
    text = body["schema"]
    kind = (body.get("schemaType") or "AVRO").upper()
    if kind in ("AVRO", "JSON"):
        try:
            text = json.dumps(json.loads(text), sort_keys=True)
        except ValueError:
            pass
    refs = tuple((r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    return kind, text, refs


def _schema_body(s: dict, **extra) -> dict:
    body = dict(extra)
    body["schema"] = s["schema"]
    if s["schemaType"] != "AVRO":
        body["schemaType"] = s["schemaType"]
    if s["references"]:
        body["references"] = s["references"]
    body["guid"] = s["guid"]
    return body


class _Handler(BaseHTTPRequestHandler):
    registry: RegistryServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: int, message: str) -> None:
        self._send(status, {"error_code": code, "message": message})

    def _authorized(self) -> bool:
        r = self.registry
        auth = self.headers.get("Authorization", "")
        if r.user_info is not None:
            return auth == "Basic " + base64.b64encode(r.user_info.encode()).decode()
        if r.bearer_token is not None:
            return auth == f"Bearer {r.bearer_token}"
        return True

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        r = self.registry
        parts = urlsplit(self.path)
        path = unquote(parts.path).rstrip("/")
        query = parse_qs(parts.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        with r.lock:
            r.requests.append((method, path))
            failure = r.failures.pop(0) if r.failures else None
            delay = r.delay_s
        if delay:
            time.sleep(delay)
        if failure is not None:
            return self._error(
                failure, 50001 if failure == 500 else failure * 100, "Injected failure"
            )
        if not self._authorized():
            return self._error(401, 401, "Unauthorized")
        seg = path.strip("/").split("/")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self._error(400, 400, "Unrecognized JSON")
        with r.lock:
            return self._route(method, seg, body, query)

    def _route(self, method, seg, body, query):
        r = self.registry
        if method == "GET" and seg[:2] == ["schemas", "ids"] and len(seg) == 3:
            i = int(seg[2])
            if not 0 < i <= len(r.schemas):
                return self._error(404, 40403, f"Schema {i} not found")
            return self._send(200, _schema_body(r.schemas[i - 1]))
        if method == "GET" and seg[:2] == ["schemas", "guids"] and len(seg) == 3:
            for s in r.schemas:
                if s["guid"] == seg[2]:
                    return self._send(200, _schema_body(s))
            return self._error(404, 40403, f"Schema {seg[2]} not found")
        if method == "GET" and seg == ["schemas", "types"]:
            return self._send(200, ["JSON", "PROTOBUF", "AVRO"])
        if method == "GET" and seg == ["subjects"]:
            return self._send(200, sorted(r.subjects))
        if seg[0] == "config":
            return self._send(200, {"compatibilityLevel": "BACKWARD"})
        if seg[0] != "subjects" or len(seg) < 2:
            return self._error(404, 404, "HTTP 404 Not Found")
        subject = seg[1]
        if method == "POST" and len(seg) == 3 and seg[2] == "versions":
            if not isinstance(body, dict) or "schema" not in body:
                return self._error(422, 42201, "Invalid schema: no schema given")
            if (body.get("schemaType") or "AVRO") in ("AVRO", "JSON"):
                try:
                    json.loads(body["schema"])
                except ValueError:
                    return self._error(422, 42201, "Invalid schema")
            # Unlocked call: register takes the lock itself.
            r.lock.release()
            try:
                answer = r.register(subject, body)
            finally:
                r.lock.acquire()
            return self._send(200, answer)
        if subject not in r.subjects:
            return self._error(404, 40401, f"Subject '{subject}' not found.")
        if method == "POST" and len(seg) == 2:
            key = _key(body)
            for version, schema_id in enumerate(r.subjects[subject], 1):
                if _key(r.schemas[schema_id - 1]) == key:
                    return self._send(200, r.version_body(subject, version))
            return self._error(404, 40403, "Schema not found")
        if method == "GET" and len(seg) == 3 and seg[2] == "versions":
            return self._send(200, list(range(1, len(r.subjects[subject]) + 1)))
        if method == "GET" and len(seg) == 4 and seg[2] == "versions":
            versions = r.subjects[subject]
            v = seg[3]
            number = len(versions) if v in ("latest", "-1") else int(v) if v.isdigit() else 0
            if not 0 < number <= len(versions):
                return self._error(404, 40402, f"Version {v} not found.")
            return self._send(200, r.version_body(subject, number))
        return self._error(404, 404, "HTTP 404 Not Found")
