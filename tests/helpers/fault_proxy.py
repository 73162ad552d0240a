"""A fault-injecting TCP proxy for Kafka connections, loopback only.

``FaultProxy`` listens on ``127.0.0.1:<free port>`` and forwards every connection to one
target (a broker). It reads the Kafka frames going both ways, so it can act on requests
and responses, not just on bytes:

- ``cut_every(ms)``: every ``ms`` milliseconds, cut every open connection (mid-frame when a
  response is on its way: the client gets a prefix of it, then EOF);
- ``cut_after_bytes(n, connections=1)``: the next ``connections`` connections are cut once
  ``n`` bytes went back to the client;
- ``drop_after_request(api_key, count, every=1)``: ``count`` requests of ``api_key`` (every
  ``every``-th one) reach the broker, but when the answer comes the connection is cut
  instead of forwarding it (the broker did the work; the client never hears);
- ``stall()`` / ``resume()``: stop forwarding anything, in either direction, on every
  connection, old and new (the client's connect still succeeds: the kernel accepts);
- ``flip_byte(api_key, position=None, in_records=False)``: flip one byte of the next
  response of ``api_key``, at ``position`` in the frame or, with ``in_records``, inside the
  record data of the first record batch of a Fetch response (past its CRC'd header);
- ``rewrite_response(api_key, rewrite, count=1)``: hand responses of ``api_key`` to
  ``rewrite(frame, version)``, which returns the frame to send instead or None to leave it
  alone, until ``count`` of them were rewritten.

``requests(api_key)`` counts the requests of ``api_key`` that went through (what a client
sent, seen from outside it).

The proxy rewrites nothing else: for a broker to be reached only through it, the broker
must advertise the proxy's port (``TansuBroker(advertised_port=proxy.port)``); create the
proxy first, start the broker, then ``proxy.set_target(...)``. ``stats`` counts what it
did. One thread accepts, one serves each connection, one runs ``cut_every``; ``close()``
stops and joins them all.
"""

from __future__ import annotations

import collections
import select
import socket
import struct
import threading
import time

_POLL = 0.02
_SIZE = struct.Struct(">i")


class FaultProxy:
    def __init__(self, target: tuple[str, int] | None = None) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._server.settimeout(_POLL * 5)
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pipes: set[_Pipe] = set()
        self._threads: list[threading.Thread] = []
        self.stats: collections.Counter = collections.Counter()
        # fault settings, read by the pipes under the lock
        self._stalled = False
        self._cut_after: list[int] = []  # one byte budget per connection still to be cut
        self._drop_after: dict[int, int] = {}  # api key -> responses still to drop
        self._drop_every: dict[int, int] = {}  # api key -> drop every n-th request
        self._seen: collections.Counter = collections.Counter()  # requests by api key
        self._keep: set[int] = set()  # api keys whose request frames are kept
        self.kept: list[tuple[int, int, bytes]] = []  # (api_key, version, frame)
        self._flips: list[dict] = []
        self.flipped: list[dict] = []  # what flip_byte did: api, position, topic, partition...
        self._rewrites: list[list] = []  # [api key, rewrite, responses still to rewrite]
        self._cutter: threading.Thread | None = None
        self._cut_interval: float | None = None
        self._accepter = threading.Thread(
            target=self._accept, name="fault-proxy-accept", daemon=True
        )
        self._accepter.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    #: as a broker's: what a client bootstraps with to go through the proxy
    bootstrap = address

    def set_target(self, host: str, port: int) -> None:
        self.target = (host, port)

    # ---- faults -----------------------------------------------------------------------------

    def cut_every(self, ms: float | None) -> None:
        """Cut every connection every ``ms`` milliseconds (None: stop cutting)."""
        with self._lock:
            self._cut_interval = None if ms is None else ms / 1000
            if self._cut_interval is not None and self._cutter is None:
                self._cutter = threading.Thread(
                    target=self._cut_loop, name="fault-proxy-cut", daemon=True
                )
                self._cutter.start()

    def cut_all(self) -> None:
        with self._lock:
            pipes = list(self._pipes)
        for pipe in pipes:
            pipe.cut_requested = True

    def cut_after_bytes(self, n: int, connections: int = 1) -> None:
        with self._lock:
            self._cut_after.extend([n] * connections)

    def drop_after_request(self, api_key: int, count: int = 1, every: int = 1) -> None:
        with self._lock:
            self._drop_after[api_key] = self._drop_after.get(api_key, 0) + count
            self._drop_every[api_key] = every

    def pending_drops(self, api_key: int) -> int:
        with self._lock:
            return self._drop_after.get(api_key, 0)

    def stall(self) -> None:
        with self._lock:
            self._stalled = True

    def resume(self) -> None:
        with self._lock:
            self._stalled = False

    def flip_byte(
        self,
        api_key: int,
        position: int | None = None,
        *,
        in_records: bool = False,
        record_byte: int = 0,
        xor: int = 0x01,
    ) -> None:
        """Flip (xor) one byte of the next response of ``api_key``: at ``position`` in the
        frame (after the size prefix), or ``record_byte`` bytes into the record data of the
        first record batch (``in_records``: a Fetch response)."""
        if position is None and not in_records:
            raise ValueError("give a position or in_records=True")
        with self._lock:
            self._flips.append(
                {
                    "api_key": api_key,
                    "position": position,
                    "in_records": in_records,
                    "record_byte": record_byte,
                    "xor": xor,
                }
            )

    def rewrite_response(self, api_key: int, rewrite, count: int = 1) -> None:
        with self._lock:
            self._rewrites.append([api_key, rewrite, count])

    def pending_rewrites(self, api_key: int) -> int:
        with self._lock:
            return sum(n for key, _, n in self._rewrites if key == api_key)

    def _rewrite(self, api_key: int, version: int, frame: bytearray) -> bytearray:
        with self._lock:
            entry = next((e for e in self._rewrites if e[0] == api_key and e[2] > 0), None)
        if entry is None:
            return frame
        new = entry[1](frame, version)
        if new is None:
            return frame
        with self._lock:
            entry[2] -= 1
            self.stats["rewrites"] += 1
        return bytearray(new)

    def reset(self) -> None:
        """No more faults (cutting stops, a stall ends) and the counters start again."""
        with self._lock:
            self._stalled = False
            self._cut_interval = None
            self._cut_after.clear()
            self._drop_after.clear()
            self._drop_every.clear()
            self._seen.clear()
            self._keep.clear()
            self.kept.clear()
            self._flips.clear()
            self.flipped.clear()
            self._rewrites.clear()
            self.stats.clear()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._pipes)

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._accepter.join(5)
        self._server.close()
        if self._cutter is not None:
            self._cutter.join(5)
        for t in list(self._threads):
            t.join(5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def threads_alive(self) -> int:
        return sum(
            t.is_alive()
            for t in [self._accepter, *self._threads] + ([self._cutter] if self._cutter else [])
        )

    # ---- internals --------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._count("connections")
            t = threading.Thread(
                target=self._serve, args=(client,), name="fault-proxy-pipe", daemon=True
            )
            with self._lock:
                self._threads = [x for x in self._threads if x.is_alive()]
                self._threads.append(t)
            t.start()

    def _cut_loop(self) -> None:
        next_cut = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                interval = self._cut_interval
            if interval is None:
                time.sleep(_POLL)  # the proxy's own loop: no cuts asked for yet
                next_cut = time.monotonic()
                continue
            next_cut += interval
            delay = next_cut - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            if self._cut_interval is not None:
                self.cut_all()

    def _serve(self, client: socket.socket) -> None:
        target = self.target
        if target is None:
            client.close()
            return
        try:
            server = socket.create_connection(target, timeout=5)
        except OSError:
            client.close()
            return
        pipe = _Pipe(self, client, server)
        with self._lock:
            if self._cut_after:
                pipe.down_budget = self._cut_after.pop(0)
            self._pipes.add(pipe)
        try:
            pipe.run()
        finally:
            with self._lock:
                self._pipes.discard(pipe)
            pipe.close()

    def requests(self, api_key: int) -> int:
        """How many requests of ``api_key`` went through since the start or ``reset()``."""
        with self._lock:
            return self._seen[api_key]

    def keep_requests(self, api_key: int) -> None:
        """Keep every request frame of ``api_key`` from now on in ``kept`` (what the
        client asked, seen from outside it)."""
        with self._lock:
            self._keep.add(api_key)

    # called by pipes, under no lock
    def _kept(self, api_key: int, version: int, frame: bytes) -> None:
        with self._lock:
            if api_key in self._keep:
                self.kept.append((api_key, version, frame))

    def _drop_candidate(self, api_key: int) -> bool:
        """A request passes: is it one whose answer is to be dropped (if drops are left
        when the answer comes)?"""
        with self._lock:
            self._seen[api_key] += 1
            return (
                self._drop_after.get(api_key, 0) > 0
                and self._seen[api_key] % self._drop_every.get(api_key, 1) == 0
            )

    def _take_drop(self, api_key: int) -> bool:
        with self._lock:
            left = self._drop_after.get(api_key, 0)
            if left <= 0:
                return False
            self._drop_after[api_key] = left - 1
            return True

    def _take_flip(self, api_key: int) -> dict | None:
        with self._lock:
            for i, flip in enumerate(self._flips):
                if flip["api_key"] == api_key:
                    return self._flips.pop(i)
        return None

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n

    def _is_stalled(self) -> bool:
        with self._lock:
            return self._stalled


class _Pipe:
    """One proxied connection: both sockets, owned by one thread."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket):
        self.proxy = proxy
        self.client, self.server = client, server
        self.up = bytearray()  # client -> server bytes not yet split into frames
        self.down = bytearray()  # server -> client bytes of the frame being received
        self.requests: collections.deque = collections.deque()  # (api_key, version, drop?)
        self.down_budget: int | None = None
        self.cut_requested = False

    def close(self) -> None:
        for s in (self.client, self.server):
            try:
                s.close()
            except OSError:
                pass

    def run(self) -> None:
        proxy = self.proxy
        while not proxy._stop.is_set():
            if self.cut_requested:
                self._cut(partial=True)
                return
            if proxy._is_stalled():
                time.sleep(_POLL)  # the proxy's own loop: stalled, it passes nothing on
                continue
            try:
                readable, _, _ = select.select([self.client, self.server], [], [], _POLL)
            except (OSError, ValueError):
                return
            for sock in readable:
                try:
                    data = sock.recv(256 * 1024)
                except OSError:
                    return
                if not data:
                    return
                if sock is self.client:
                    proxy._count("bytes_up", len(data))
                    self._requests_seen(data)
                    try:
                        self.server.sendall(data)
                    except OSError:
                        return
                elif not self._from_server(data):
                    return

    def _cut(self, partial: bool) -> None:
        """Cut now: with ``partial``, first hand the client half of a response in progress."""
        self.proxy._count("cuts")
        if partial and len(self.down) > 1:
            try:
                self.client.sendall(bytes(self.down[: len(self.down) // 2]))
            except OSError:
                pass
        try:
            self.client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close()

    def _requests_seen(self, data: bytes) -> None:
        self.up += data
        while len(self.up) >= 4:
            size = _SIZE.unpack_from(self.up, 0)[0]
            if len(self.up) < 4 + size:
                break
            api_key, version = struct.unpack_from(">hh", self.up, 4)
            self.proxy._kept(api_key, version, bytes(self.up[4 : 4 + size]))
            del self.up[: 4 + size]
            self.requests.append((api_key, version, self.proxy._drop_candidate(api_key)))

    def _from_server(self, data: bytes) -> bool:
        """Buffer the response; forward whole frames, faults applied. False: stop."""
        self.down += data
        while len(self.down) >= 4:
            size = _SIZE.unpack_from(self.down, 0)[0]
            if len(self.down) < 4 + size:
                return True
            frame = bytearray(self.down[: 4 + size])
            del self.down[: 4 + size]
            api_key, version, drop = self.requests.popleft() if self.requests else (-1, -1, False)
            if drop and self.proxy._take_drop(api_key):
                self.proxy._count("dropped_responses")
                self._cut(partial=False)
                return False
            flip = self.proxy._take_flip(api_key)
            if flip is not None:
                self._flip(frame, api_key, version, flip)
            frame = self.proxy._rewrite(api_key, version, frame)
            if self.down_budget is not None:
                if len(frame) >= self.down_budget:
                    try:
                        self.client.sendall(bytes(frame[: self.down_budget]))
                    except OSError:
                        pass
                    self.down_budget = 0
                    self._cut(partial=False)
                    return False
                self.down_budget -= len(frame)
            try:
                self.client.sendall(frame)
            except OSError:
                return False
            self.proxy._count("bytes_down", len(frame))
        return True

    def _flip(self, frame: bytearray, api_key: int, version: int, flip: dict) -> None:
        where = {"api_key": api_key, "version": version}
        if flip["in_records"]:
            found = _first_records(frame, api_key, version)
            if found is None:
                with self.proxy._lock:  # no records in this one: try the next
                    self.proxy._flips.insert(0, flip)
                return
            start, topic, partition, batch = found
            position = start + 61 + flip["record_byte"]  # past the v2 batch header
            where.update(topic=topic, partition=partition, base_offset=batch)
        else:
            position = 4 + flip["position"]
        position = min(position, len(frame) - 1)
        frame[position] ^= flip["xor"]
        where["position"] = position
        self.proxy.flipped.append(where)
        self.proxy._count("flips")


def _first_records(frame: bytearray, api_key: int, version: int):
    """``(frame position of the first record batch, topic, partition, base offset)`` of a
    Fetch response, or None when it carries no records."""
    from protocol.framing import decode_response_header
    from protocol.schemas import BY_KEY

    if api_key != 1:
        return None
    api = BY_KEY[1]
    body = memoryview(bytes(frame))[4:]
    _, pos = decode_response_header(api, version, body)
    response, _ = api.response.decode(version, body[pos:], exact=False)
    for t in response["responses"]:
        for p in t["partitions"]:
            records = p.get("records")
            if records is not None and len(records) > 61:
                raw = bytes(records)
                at = bytes(frame).find(raw[:200], 4 + pos)
                if at < 0:
                    continue
                base_offset = struct.unpack_from(">q", raw, 0)[0]
                return at, t.get("topic"), p["partition_index"], base_offset
    return None
