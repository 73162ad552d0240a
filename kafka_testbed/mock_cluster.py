"""librdkafka's built-in mock Kafka cluster, driven through ctypes.

librdkafka ships an in-process "mock cluster": fake brokers that speak the real Kafka wire
protocol on loopback TCP ports, run on a C thread inside the creating process, and can be
told to misbehave (inject error codes, add latency, move partition leaders, take brokers
down). This module loads the very shared library ``confluent_kafka`` uses and wraps the
functions of ``src/rdkafka_mock.h`` we need.

The cluster is created as librdkafka documents: an ``rd_kafka_t`` producer handle
(``rd_kafka_conf_new`` + ``rd_kafka_new``, never used to produce) hosts
``rd_kafka_mock_cluster_new(rk, broker_cnt)``. Brokers are numbered 1..N and listen on
``127.0.0.1:<ephemeral port>``, so clients in other processes (Spark executors) connect with
``bootstrap`` too. Given ``port``, broker n listens on ``127.0.0.1:port + n - 1`` instead,
through a forward (:mod:`kafka_testbed.port_forward`), and advertises that port.

The API is experimental in librdkafka, without ABI guarantees: signatures were checked
against ``rdkafka_mock.h`` of librdkafka 2.16.0 (confluent-kafka 2.16.1);
``rd_kafka_mock_set_controller_id`` is exported but not declared there, so not wrapped.
:class:`MockCluster` sets the group initial rebalance delay (3 s in the mock) to 0 unless
told otherwise. How the mock differs from Kafka (retention, auto-created topics, one batch
per Fetch, idempotent resends appended twice) is listed in docs/testing.md, "What the
stand-in brokers do differently".
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import NamedTuple
from collections.abc import Iterable, Sequence

from .port_forward import PortForward

__all__ = ["MockCluster", "MockRequest", "librdkafka_path"]


def librdkafka_path() -> str:
    """Path of the librdkafka shared library bundled with ``confluent_kafka``."""
    import confluent_kafka  # local import: only needed when a mock cluster is used

    pkg_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    site_dir = os.path.dirname(pkg_dir)
    patterns = [
        os.path.join(site_dir, "confluent_kafka.libs", "librdkafka*.so*"),  # manylinux wheels
        os.path.join(pkg_dir, ".dylibs", "librdkafka*.dylib"),  # macOS wheels
        os.path.join(pkg_dir, "librdkafka*.so*"),
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise FileNotFoundError(
        "librdkafka shared library not found next to confluent_kafka "
        f"(looked for {', '.join(patterns)})"
    )


class MockRequest(NamedTuple):
    """One request seen by the mock cluster while tracking was on."""

    broker_id: int
    api_key: int
    timestamp_us: int  # librdkafka's monotonic clock, microseconds


_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None

_vp = ctypes.c_void_p
_cp = ctypes.c_char_p
_i16 = ctypes.c_int16
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_int = ctypes.c_int
_sz = ctypes.c_size_t

# name: (restype, argtypes) -- non-variadic functions only
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_conf_new": (_vp, []),
    "rd_kafka_conf_set": (_int, [_vp, _cp, _cp, _cp, _sz]),
    "rd_kafka_conf_destroy": (None, [_vp]),
    "rd_kafka_new": (_vp, [_int, _vp, _cp, _sz]),
    "rd_kafka_destroy": (None, [_vp]),
    "rd_kafka_err2str": (_cp, [_int]),
    "rd_kafka_err2name": (_cp, [_int]),
    "rd_kafka_version_str": (_cp, []),
    "rd_kafka_mock_cluster_new": (_vp, [_vp, _int]),
    "rd_kafka_mock_cluster_destroy": (None, [_vp]),
    "rd_kafka_mock_cluster_bootstraps": (_cp, [_vp]),
    "rd_kafka_mock_topic_create": (_int, [_vp, _cp, _int, _int]),
    "rd_kafka_mock_topic_delete": (_int, [_vp, _cp]),
    "rd_kafka_mock_topic_set_error": (None, [_vp, _cp, _int]),
    "rd_kafka_mock_partition_set_leader": (_int, [_vp, _cp, _i32, _i32]),
    "rd_kafka_mock_partition_set_follower": (_int, [_vp, _cp, _i32, _i32]),
    "rd_kafka_mock_partition_set_follower_wmarks": (_int, [_vp, _cp, _i32, _i64, _i64]),
    "rd_kafka_mock_partition_push_leader_response": (_int, [_vp, _cp, _int, _i32, _i32]),
    "rd_kafka_mock_partition_delete_records": (_int, [_vp, _cp, _i32, _i64]),
    "rd_kafka_mock_push_request_errors_array": (None, [_vp, _i16, _sz, ctypes.POINTER(_int)]),
    "rd_kafka_mock_clear_request_errors": (None, [_vp, _i16]),
    "rd_kafka_mock_broker_error_stack_cnt": (_int, [_vp, _i32, _i16, ctypes.POINTER(_sz)]),
    "rd_kafka_mock_broker_set_down": (_int, [_vp, _i32]),
    "rd_kafka_mock_broker_set_up": (_int, [_vp, _i32]),
    "rd_kafka_mock_broker_set_rtt": (_int, [_vp, _i32, _int]),
    "rd_kafka_mock_broker_set_rack": (_int, [_vp, _i32, _cp]),
    "rd_kafka_mock_broker_decommission": (_int, [_vp, _i32]),
    "rd_kafka_mock_broker_add": (_int, [_vp, _i32]),
    "rd_kafka_mock_coordinator_set": (_int, [_vp, _cp, _cp, _i32]),
    "rd_kafka_mock_set_apiversion": (_int, [_vp, _i16, _i16, _i16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_vp, _i32]),
    "rd_kafka_mock_start_request_tracking": (None, [_vp]),
    "rd_kafka_mock_stop_request_tracking": (None, [_vp]),
    "rd_kafka_mock_clear_requests": (None, [_vp]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_vp), [_vp, ctypes.POINTER(_sz)]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_vp), _sz]),
    "rd_kafka_mock_request_id": (_i32, [_vp]),
    "rd_kafka_mock_request_api_key": (_i16, [_vp]),
    "rd_kafka_mock_request_timestamp": (_i64, [_vp]),
}

# Variadic functions: called without argtypes, every argument passed as an
# explicit ctypes value of the promoted C type.
_VARIADIC = (
    "rd_kafka_mock_broker_push_request_error_rtts",
    "rd_kafka_mock_partition_push_request_errors",
)

RD_KAFKA_PRODUCER = 0


def _load() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(librdkafka_path())
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
            for name in _VARIADIC:
                getattr(lib, name).restype = _int
            _lib = lib
        return _lib


def _b(s: str) -> bytes:
    return s.encode("utf-8")


class MockCluster:
    """A librdkafka mock cluster with ``brokers`` brokers (ids 1..brokers).

    Use as a context manager, or call :meth:`close` when done. All methods
    raise :class:`RuntimeError` carrying librdkafka's error name when the
    underlying call reports an error (unknown topic, unknown broker, ...).

    ``port``: broker n listens on ``127.0.0.1:port + n - 1`` (``python -m kafka_testbed
    --port 9092``); :class:`~kafka_testbed.port_forward.PortTakenError` naming the port
    when another process holds it. By default each broker takes a free port.
    """

    def __init__(
        self, brokers: int = 3, *, rebalance_delay_ms: int | None = 0, port: int | None = None
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        if port is not None and not 0 < port <= 65536 - brokers:
            raise ValueError(f"port must be 1..{65536 - brokers} for {brokers} broker(s): {port}")
        self._lib = _load()
        self._rk: int | None = None
        self._mcluster: int | None = None
        self._forwards: list[PortForward] = []
        self._lock = threading.Lock()
        self.broker_count = brokers

        lib = self._lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # The hosting handle never talks to any broker; keep it from logging
        # "no bootstrap.servers" style noise. Errors of the mock are still logged.
        for key, value in (("client.id", "kafka_testbed-mock-host"), ("log_level", "3")):
            if lib.rd_kafka_conf_set(conf, _b(key), _b(value), errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise RuntimeError(f"rd_kafka_conf_set({key}): {errstr.value.decode()}")
        rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))  # takes conf
        if not rk:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._rk = rk
        mcluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
        if not mcluster:
            lib.rd_kafka_destroy(rk)
            self._rk = None
            raise RuntimeError("rd_kafka_mock_cluster_new failed (see librdkafka log on stderr)")
        self._mcluster = mcluster
        self._bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        if rebalance_delay_ms is not None:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mcluster, rebalance_delay_ms)
        if port is not None:
            try:
                self._listen_at(port)
            except BaseException:
                self.close()
                raise

    def _listen_at(self, port: int) -> None:
        """Broker n on ``127.0.0.1:port + n - 1``: librdkafka binds ports of the kernel's
        choosing, so each fixed port forwards to its broker's, and the broker advertises
        the fixed one in Metadata (every connection then goes through the forwards)."""
        from protocol.client.cluster import KafkaClient

        set_host_port = getattr(self._lib, "rd_kafka_mock_broker_set_host_port", None)
        if set_host_port is None:
            raise RuntimeError(
                f"MockCluster(port=...) needs librdkafka 2.5 or later (this is {self.version})"
            )
        set_host_port.restype, set_host_port.argtypes = _int, [_vp, _i32, _cp, _int]
        with KafkaClient(bootstrap_servers=self._bootstrap) as client:
            bound = client.metadata(topics=[]).brokers  # {broker id: (host, port)}
        for broker_id in range(1, self.broker_count + 1):
            what = f"the mock cluster's broker {broker_id}"
            self._forwards.append(PortForward(port + broker_id - 1, bound[broker_id], what))
        for broker_id, forward in enumerate(self._forwards, start=1):
            self._check(
                set_host_port(self._mc, broker_id, b"127.0.0.1", forward.port),
                f"broker_set_host_port({broker_id}, {forward.port})",
            )
        self._bootstrap = ",".join(f"127.0.0.1:{f.port}" for f in self._forwards)

    # -- lifecycle -------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` string, e.g. ``"127.0.0.1:40001,127.0.0.1:40002,..."``."""
        return self._bootstrap

    @property
    def version(self) -> str:
        """librdkafka version string of the library hosting the cluster."""
        return self._lib.rd_kafka_version_str().decode()

    def close(self) -> None:
        """Destroy the cluster, then the hosting handle. Idempotent."""
        with self._lock:
            mcluster, rk = self._mcluster, self._rk
            self._mcluster = self._rk = None
            forwards, self._forwards = self._forwards, []
        for forward in forwards:
            forward.close()
        if mcluster:
            self._lib.rd_kafka_mock_cluster_destroy(mcluster)
        if rk:
            self._lib.rd_kafka_destroy(rk)

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._mcluster is None else self._bootstrap
        return f"MockCluster(brokers={self.broker_count}, {state})"

    # -- helpers ---------------------------------------------------------

    @property
    def _mc(self) -> int:
        if self._mcluster is None:
            raise RuntimeError("MockCluster is closed")
        return self._mcluster

    def _check(self, err: int, what: str) -> None:
        if err:
            name = self._lib.rd_kafka_err2name(err).decode()
            text = self._lib.rd_kafka_err2str(err).decode()
            raise RuntimeError(f"{what}: {name} ({err}): {text}")

    # -- topics / partitions ---------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> None:
        """Create a topic; ``replication_factor`` must be <= the broker count."""
        self._check(
            self._lib.rd_kafka_mock_topic_create(
                self._mc, _b(name), partitions, replication_factor
            ),
            f"create_topic({name!r})",
        )

    def delete_topic(self, name: str) -> None:
        self._check(
            self._lib.rd_kafka_mock_topic_delete(self._mc, _b(name)), f"delete_topic({name!r})"
        )

    def topic_set_error(self, name: str, err: int) -> None:
        """Make Metadata report ``err`` for this topic (0 clears)."""
        self._lib.rd_kafka_mock_topic_set_error(self._mc, _b(name), err)

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the partition leader; ``broker_id=-1`` makes it leaderless."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_leader(self._mc, _b(topic), partition, broker_id),
            f"partition_set_leader({topic!r}, {partition}, {broker_id})",
        )

    def partition_set_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Set the preferred replica (follower) returned to fetching consumers."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_follower(
                self._mc, _b(topic), partition, broker_id
            ),
            f"partition_set_follower({topic!r}, {partition}, {broker_id})",
        )

    def partition_set_follower_wmarks(self, topic: str, partition: int, lo: int, hi: int) -> None:
        """Override the follower's low/high watermarks (-1 = follow leader)."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_follower_wmarks(
                self._mc, _b(topic), partition, lo, hi
            ),
            f"partition_set_follower_wmarks({topic!r}, {partition})",
        )

    def partition_push_leader_response(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int
    ) -> None:
        """Queue a leader id/epoch to be returned in the next leader-changing response."""
        self._check(
            self._lib.rd_kafka_mock_partition_push_leader_response(
                self._mc, _b(topic), partition, leader_id, leader_epoch
            ),
            f"partition_push_leader_response({topic!r}, {partition})",
        )

    def partition_delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Advance the log start offset to ``before_offset`` (like DeleteRecords)."""
        self._check(
            self._lib.rd_kafka_mock_partition_delete_records(
                self._mc, _b(topic), partition, before_offset
            ),
            f"partition_delete_records({topic!r}, {partition}, {before_offset})",
        )

    # -- error injection -------------------------------------------------

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` (to any broker) fail with these
        codes."""
        arr = (_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._mc, api_key, len(errors), arr)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._mc, api_key)

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors_rtts: Iterable[tuple[int, int]]
    ) -> None:
        """Per broker: the next requests of ``api_key`` answer ``err`` after ``rtt_ms``."""
        pairs = list(errors_rtts)
        args: list[object] = [_vp(self._mc), _i32(broker_id), _i16(api_key), _sz(len(pairs))]
        for err, rtt_ms in pairs:
            args += [_int(err), _int(rtt_ms)]
        self._check(
            self._lib.rd_kafka_mock_broker_push_request_error_rtts(*args),
            f"broker_push_request_error_rtts({broker_id}, {api_key})",
        )

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many injected errors are still queued for this broker/API key."""
        cnt = _sz(0)
        self._check(
            self._lib.rd_kafka_mock_broker_error_stack_cnt(
                self._mc, broker_id, api_key, ctypes.byref(cnt)
            ),
            f"broker_error_stack_count({broker_id}, {api_key})",
        )
        return cnt.value

    def partition_push_request_errors(
        self, topic: str, partition: int, api_key: int, errors: Sequence[int]
    ) -> None:
        """Per partition error injection (librdkafka applies it to partition-level responses)."""
        args: list[object] = [
            _vp(self._mc),
            _cp(_b(topic)),
            _i32(partition),
            _i16(api_key),
            _sz(len(errors)),
        ]
        args += [_int(e) for e in errors]
        self._check(
            self._lib.rd_kafka_mock_partition_push_request_errors(*args),
            f"partition_push_request_errors({topic!r}, {partition}, {api_key})",
        )

    # -- brokers ---------------------------------------------------------

    def broker_set_down(self, broker_id: int) -> None:
        """Close all connections of the broker and refuse new ones (port is kept)."""
        self._check(
            self._lib.rd_kafka_mock_broker_set_down(self._mc, broker_id),
            f"broker_set_down({broker_id})",
        )

    def broker_set_up(self, broker_id: int) -> None:
        self._check(
            self._lib.rd_kafka_mock_broker_set_up(self._mc, broker_id),
            f"broker_set_up({broker_id})",
        )

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of this broker by ``rtt_ms``."""
        self._check(
            self._lib.rd_kafka_mock_broker_set_rtt(self._mc, broker_id, rtt_ms),
            f"broker_set_rtt({broker_id})",
        )

    def broker_set_rack(self, broker_id: int, rack: str) -> None:
        self._check(
            self._lib.rd_kafka_mock_broker_set_rack(self._mc, broker_id, _b(rack)),
            f"broker_set_rack({broker_id})",
        )

    def broker_decommission(self, broker_id: int) -> None:
        self._check(
            self._lib.rd_kafka_mock_broker_decommission(self._mc, broker_id),
            f"broker_decommission({broker_id})",
        )

    def broker_add(self, broker_id: int) -> None:
        self._check(
            self._lib.rd_kafka_mock_broker_add(self._mc, broker_id), f"broker_add({broker_id})"
        )

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator for ``key_type`` ("group" or "transaction") ``key``."""
        self._check(
            self._lib.rd_kafka_mock_coordinator_set(self._mc, _b(key_type), _b(key), broker_id),
            f"coordinator_set({key_type!r}, {key!r}, {broker_id})",
        )

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Change the version range advertised (and accepted) for ``api_key``; -1/-1 disables it."""
        self._check(
            self._lib.rd_kafka_mock_set_apiversion(self._mc, api_key, min_version, max_version),
            f"set_apiversion({api_key}, {min_version}, {max_version})",
        )

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc, delay_ms)

    # -- request tracking ------------------------------------------------

    def start_request_tracking(self) -> None:
        """Start recording every request received by any broker."""
        self._lib.rd_kafka_mock_start_request_tracking(self._mc)

    def stop_request_tracking(self) -> None:
        """Stop recording and discard what was recorded."""
        self._lib.rd_kafka_mock_stop_request_tracking(self._mc)

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._mc)

    def get_requests(self) -> list[MockRequest]:
        """Requests recorded since tracking started (or the last clear), oldest first."""
        cnt = _sz(0)
        arr = self._lib.rd_kafka_mock_get_requests(self._mc, ctypes.byref(cnt))
        if not arr:
            return []
        try:
            lib = self._lib
            return [
                MockRequest(
                    lib.rd_kafka_mock_request_id(arr[i]),
                    lib.rd_kafka_mock_request_api_key(arr[i]),
                    lib.rd_kafka_mock_request_timestamp(arr[i]),
                )
                for i in range(cnt.value)
            ]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(arr, cnt.value)
