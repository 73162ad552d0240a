"""Fuzz targets: every decoder that reads bytes from the network, as ``run(data)``.

Shared by the hypothesis fuzzers of ``make test`` (``tests/test_fuzz_decoders.py``: valid
encodings mutated structurally, a bounded number of examples) and the long runs of ``make
fuzz`` (``tests/fuzz/run.py``: atheris, coverage-guided, from the same seeds). Not
collected by pytest.

Each target turns arbitrary bytes into one decoder call (the first bytes choose the API,
version, codec or options) and declares which exceptions may escape: ``ProtocolError``
and its subclasses, nothing else (SCRAM also ``AuthenticationError``, its verdict on a
server). ``check_bounded`` runs one input and fails when anything else escapes, when it
takes more than a second of CPU (the thread's own, so that a busy machine does not
count; the wall time is reported too), or when its allocations peak above a few MB
(``tracemalloc``; decompression is capped at 1 MiB here, as a reader caps it with
``max_decompressed``).
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from dataclasses import dataclass
from collections.abc import Callable

from protocol.errors import AuthenticationError, ProtocolError
from protocol.framing import ClientFraming, FrameBuffer
from protocol.records import batch as B
from protocol.records import compression as C
from protocol.records import decode_records
from protocol.schemas import ALL_APIS, API_VERSIONS, FETCH, METADATA

from ..helpers.record_builders import build_control_batch

MAX_SECONDS = 1.0
MAX_PEAK_BYTES = 8 * 1024 * 1024
DECOMPRESS_CAP = 1 << 20


@dataclass
class Target:
    name: str
    what: str
    run: Callable[[bytes], object]
    seeds: Callable[[], list[bytes]]
    allowed: tuple = (ProtocolError,)


class Unbounded(AssertionError):
    """An input took too long or allocated too much."""


def check_bounded(target: Target, data: bytes, stats: dict | None = None) -> str | None:
    """Run one input; returns the name of the typed error it raised (None: decoded).
    Anything not allowed propagates; an input over the time or memory bound raises
    ``Unbounded``. ``stats`` (optional) accumulates counts, the slowest and the largest."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    started, cpu_started = time.perf_counter(), time.thread_time()
    error = None
    try:
        target.run(data)
    except target.allowed as e:
        error = type(e).__name__
    finally:
        wall = time.perf_counter() - started
        elapsed = time.thread_time() - cpu_started  # this thread's CPU: load elsewhere
        _, peak = tracemalloc.get_traced_memory()  # does not count
        if not tracing:
            tracemalloc.stop()
    if stats is not None:
        stats["inputs"] = stats.get("inputs", 0) + 1
        stats["max_ms"] = max(stats.get("max_ms", 0.0), elapsed * 1000)
        stats["max_wall_ms"] = max(stats.get("max_wall_ms", 0.0), wall * 1000)
        stats["max_peak_kb"] = max(stats.get("max_peak_kb", 0), peak // 1024)
        key = f"error_{error}" if error else "decoded"
        stats[key] = stats.get(key, 0) + 1
    if elapsed > MAX_SECONDS:
        raise Unbounded(
            f"{target.name}: {elapsed:.2f} s of CPU for {len(data)} bytes: {data[:64]!r}"
        )
    if peak > MAX_PEAK_BYTES:
        raise Unbounded(
            f"{target.name}: {peak} bytes allocated for {len(data)} bytes of input: {data[:64]!r}"
        )
    return error


# ---- frames ----------------------------------------------------------------------------------

_IN_FLIGHT = [(API_VERSIONS, 3), (METADATA, 12), (FETCH, 16), (METADATA, 1), (FETCH, 4)]


def run_frames(data: bytes) -> None:
    """data[0] seeds the chunking; the rest is the byte stream. A FrameBuffer (1 MiB
    frames at most) and a ClientFraming with five requests in flight (ApiVersions v3,
    Metadata v12 and v1, Fetch v16 and v4: correlation ids 0..4) are fed the same stream
    in random-sized pieces."""
    if not data:
        return
    rng = random.Random(data[0])
    stream = data[1:]
    frames = FrameBuffer(1 << 20)
    framing = ClientFraming("fuzz", 1 << 20)
    for api, version in _IN_FLIGHT:
        framing.request(api, version, _EMPTY_REQUEST[api.key])
    pos = 0
    while pos < len(stream):
        step = rng.choice((1, 2, 3, 4, 7, 64, 4096))
        piece = stream[pos : pos + step]
        pos += step
        frames.feed(piece)
        framing.receive_data(piece)
        assert frames.receive_buffer().nbytes and framing.receive_buffer().nbytes


_EMPTY_REQUEST = {
    18: {"client_software_name": "fuzz", "client_software_version": "1"},
    3: {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    },
    1: {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
    },
}


def seeds_frames() -> list[bytes]:
    from tests.helpers.schema_roundtrip import _encoded

    out = []
    stream = bytearray()
    for cid, (api, version) in enumerate(_IN_FLIGHT):
        body = bytearray(struct.pack(">i", cid))
        if api.response_header_version(version) >= 1:
            body.append(0)
        body += _encoded(api.response, version)
        stream += struct.pack(">i", len(body)) + body
    for chunking in (0, 1, 77, 200):
        out.append(bytes([chunking]) + bytes(stream))
    out.append(b"\x05" + bytes(stream[: len(stream) // 2]))
    return out


# ---- response bodies -------------------------------------------------------------------------

_VERSIONS = [(api, v) for api in ALL_APIS for v in api.response.versions]


def run_response(data: bytes) -> None:
    """data[0:2] pick one (API, version) of every response the client decodes; the rest
    is its body."""
    if len(data) < 2:
        return
    api, version = _VERSIONS[int.from_bytes(data[:2], "big") % len(_VERSIONS)]
    api.response.decode(version, data[2:], exact=False)


def seeds_response() -> list[bytes]:
    from tests.helpers.schema_roundtrip import _encoded

    out = []
    for i, (api, version) in enumerate(_VERSIONS):
        for nulls in (False, True):
            out.append(i.to_bytes(2, "big") + _encoded(api.response, version, nulls))
    return out


# ---- record batches (v2 and legacy message sets) --------------------------------------------


def run_records(data: bytes):
    """data[0] sets the options (headers, read_committed with an aborted transaction, CRC
    checks off so mutations reach the record parser, a start offset inside the data);
    the rest is the RECORDS field of a Fetch partition. Returns what decode_records
    returns (None for no input)."""
    if not data:
        return None
    flags = data[0]
    return decode_records(
        data[1:],
        topic="fuzz",
        partition=7,
        start_offset=(flags >> 5) & 3,
        end_offset=None if flags & 0x10 else 40,
        include_headers=bool(flags & 1),
        read_committed=bool(flags & 2),
        aborted_transactions=[(1234, 2)] if flags & 2 else None,
        verify_crc=not flags & 4,
        max_decompressed=DECOMPRESS_CAP,
    )


def _records(n: int, start: int = 0, headers: bool = True) -> list:
    return [
        B.Record(
            start + i,
            1_700_000_000_000 + i,
            None if i % 4 == 0 else b"k%d" % i,
            None if i % 5 == 0 else b"value-%d" % i * (i % 3 + 1),
            (("h", b"%d" % i), ("n", None)) if headers and i % 2 else (),
        )
        for i in range(n)
    ]


def _legacy_message(offset, key, value, magic, codec=0, timestamp=1_700_000_000_000):
    import zlib

    body = struct.pack(">bb", magic, codec)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def seeds_records() -> list[bytes]:
    batches = [
        B.build_batch(_records(6), compression=codec)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    ]
    batches.append(
        B.build_batch(
            _records(3, 6), producer_id=1234, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    batches.append(build_control_batch(0, offset=9, producer_id=1234))
    legacy = _legacy_message(0, b"k", b"v0", 0) + _legacy_message(1, None, b"v1", 1)
    inner = _legacy_message(0, b"a", b"x", 1) + _legacy_message(1, b"b", b"y", 1)
    wrapper = _legacy_message(1, None, C.compress("gzip", inner), 1, codec=1)
    out = []
    for flags in (0, 1, 3, 4, 5, 0x17):
        for b in batches:
            out.append(bytes([flags]) + b)
        out.append(bytes([flags]) + b"".join(batches[:2] + batches[5:]))
        out.append(bytes([flags]) + legacy + wrapper)
    return out


# ---- compressed payloads --------------------------------------------------------------------


def run_compressed(data: bytes) -> None:
    """data[0] % 5 picks the codec (bit 7: lz4 with Kafka 0.8's broken header checksum);
    the rest is the compressed payload of one batch."""
    if not data:
        return
    codec = data[0] % 5
    if codec == C.LZ4 and data[0] & 0x80:
        C.CODECS[C.LZ4].decompress(data[1:], max_size=DECOMPRESS_CAP, legacy_header=True)
    else:
        C.decompress(codec, data[1:], max_size=DECOMPRESS_CAP, topic="fuzz", partition=1)


def seeds_compressed() -> list[bytes]:
    plain = b"".join(b"record %d of a batch; " % i for i in range(300))
    out = []
    for codec in range(5):
        packed = C.compress(codec, plain)
        out.append(bytes([codec]) + packed)
        if codec:
            out.append(bytes([codec]) + C.compress(codec, plain[:100]) + C.compress(codec, b"x"))
    from tests.helpers.compression import _break_lz4_header

    out.append(bytes([0x80 | C.LZ4]) + _break_lz4_header(C.compress(C.LZ4, plain)))
    import cramjam

    out.append(bytes([C.SNAPPY]) + bytes(cramjam.snappy.compress_raw(plain)))
    return out


# ---- SCRAM server messages ------------------------------------------------------------------

_RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"


def run_scram(data: bytes) -> None:
    """data[0] bit 0: the input is server-first; else a valid server-first is answered and
    the input is server-final."""
    from protocol.sasl import ScramMechanism

    if not data:
        return
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=_RFC_NONCE, max_iterations=8192)
    mech.client_first()
    if data[0] & 1:
        mech.client_final(data[1:])
    else:
        mech.client_final(_RFC_SERVER_FIRST)
        mech.verify_server_final(data[1:])


_RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)


def seeds_scram() -> list[bytes]:
    return [
        b"\x01" + _RFC_SERVER_FIRST,
        b"\x00v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        b"\x00e=invalid-proof",
        b"\x01e=unknown-user",
    ]


# ---- Avro values (kafka_common.avro): the datums a Schema Registry topic carries --------

AVRO_SCHEMAS = [
    {
        "type": "record",
        "name": "Flat",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "score", "type": "double"},
            {"name": "n", "type": ["null", "int"]},
            {"name": "ok", "type": "boolean"},
        ],
    },
    {
        "type": "record",
        "name": "Deep",
        "fields": [
            {
                "name": "xs",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "I",
                        "fields": [
                            {
                                "name": "k",
                                "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]},
                            },
                            {
                                "name": "m",
                                "type": {"type": "map", "values": ["null", "bytes", "float"]},
                            },
                        ],
                    },
                },
            },
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
            {"name": "nulls", "type": {"type": "array", "items": "null"}},
        ],
    },
    {
        "type": "record",
        "name": "Logical",
        "fields": [
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        ],
    },
]
_AVRO_DECODERS: list = []


def run_avro(data: bytes):
    """The first byte picks a schema; the rest is a datum, also cut in two as two more rows
    (one read with a reader schema that drops a field, so skipping is fuzzed too)."""
    from kafka_common.avro import Decoder, parse_schema
    import pyarrow as pa

    if not _AVRO_DECODERS:
        for s in AVRO_SCHEMAS:
            w = parse_schema(s)
            reader = dict(s, fields=s["fields"][1:])
            _AVRO_DECODERS.append((Decoder(w, w), Decoder(w, parse_schema(reader))))
    full, partial = _AVRO_DECODERS[data[0] % len(AVRO_SCHEMAS) if data else 0]
    body = data[1:]
    rows = pa.array([body, body[: len(body) // 2], body[len(body) // 2 :]], pa.binary())
    for decoder in (full, partial):
        arr, errors = decoder.decode(rows)
        assert len(arr) == 3 and errors.size == 3
    return arr


def seeds_avro() -> list[bytes]:
    import datetime
    import decimal

    import pyarrow as pa

    from kafka_common.avro import Encoder, arrow_type, parse_schema

    values = [
        [
            {"id": 1 << 40, "name": "héllo", "score": 2.5, "n": None, "ok": True},
            {"id": -1, "name": "", "score": -0.0, "n": 7, "ok": False},
        ],
        [
            {
                "xs": [{"k": "B", "m": [("a", {"member0": b"xy", "member1": None}), ("b", None)]}],
                "f": b"abc",
                "nulls": [None, None],
            },
            {"xs": [], "f": b"\x00\x00\x00", "nulls": []},
        ],
        [
            {
                "at": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, datetime.timezone.utc),
                "d": decimal.Decimal("-1234567.89"),
                "day": datetime.date(1969, 7, 20),
            }
        ],
    ]
    seeds = []
    for k, (schema, rows) in enumerate(zip(AVRO_SCHEMAS, values)):
        s = parse_schema(schema)
        for blob in Encoder(s).encode(pa.array(rows, type=arrow_type(s))).to_pylist():
            seeds.append(bytes([k]) + blob)
    return seeds


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target(
            "frames",
            "FrameBuffer and ClientFraming (5 responses in flight), random pieces",
            run_frames,
            seeds_frames,
        ),
        Target(
            "responses",
            "every response schema, every version (ALL_APIS)",
            run_response,
            seeds_response,
        ),
        Target(
            "records",
            "decode_records: v2 batches of every codec, transactional, control, "
            "legacy message sets",
            run_records,
            seeds_records,
        ),
        Target(
            "compressed",
            "every codec's decompress (and lz4 with Kafka 0.8's header)",
            run_compressed,
            seeds_compressed,
        ),
        Target(
            "scram",
            "SCRAM server-first and server-final messages",
            run_scram,
            seeds_scram,
            (ProtocolError, AuthenticationError),
        ),
        Target(
            "avro",
            "kafka_common.avro's Decoder: Avro datums of three schemas (a flat record, "
            "nested arrays/maps/unions/enums, logical types), whole and cut, with and without "
            "a field to skip; it flags bad rows and raises nothing",
            run_avro,
            seeds_avro,
            (),
        ),
    ]
}


# ---- structured mutations -------------------------------------------------------------------

#: Values that sit at the edges of Kafka's length and count fields.
BOUNDARY_INT32 = [0x7FFFFFFF, 0x7FFFFFFE, -1, -2, 0x40000000, 0x10000, 0, 1, -0x80000000]
BOUNDARY_INT16 = [0x7FFF, -1, -2, 0, 1, -0x8000]
BOUNDARY_INT64 = [0x7FFFFFFFFFFFFFFF, -1, -0x8000000000000000, 1 << 53]
BOUNDARY_UVARINT = [0x7FFFFFFF, 0xFFFFFFFF, 1 << 28, 0x80000000, 0, 1, 127, 128, 16384]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


MUTATIONS = (
    "int32",
    "int16",
    "int64",
    "uvarint",
    "zigzag",
    "flip",
    "truncate",
    "repeat",
    "delete",
    "splice",
)


def mutate(
    raw: bytearray, op: str, pos: int, choice: int, other: bytes = b"", length: int = 1
) -> None:
    """Apply one structural mutation at ``pos`` (``choice`` indexes the value tables,
    ``length`` sizes slices): numbers at the edges of Kafka's fields written over what is
    there (int16/int32/int64 big-endian, unsigned and zigzag varints replacing one byte),
    a flipped bit, a cut, a repeated or deleted slice (array elements), a splice of
    another encoding."""
    if not raw:
        raw.extend(other[:length])
        return
    pos %= len(raw)
    if op == "int32":
        raw[pos : pos + 4] = struct.pack(">i", BOUNDARY_INT32[choice % len(BOUNDARY_INT32)])
    elif op == "int16":
        raw[pos : pos + 2] = struct.pack(">h", BOUNDARY_INT16[choice % len(BOUNDARY_INT16)])
    elif op == "int64":
        raw[pos : pos + 8] = struct.pack(">q", BOUNDARY_INT64[choice % len(BOUNDARY_INT64)])
    elif op == "uvarint":
        raw[pos : pos + 1] = _uvarint(BOUNDARY_UVARINT[choice % len(BOUNDARY_UVARINT)])
    elif op == "zigzag":
        v = BOUNDARY_INT32[choice % len(BOUNDARY_INT32)]
        raw[pos : pos + 1] = _uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)
    elif op == "flip":
        raw[pos] ^= 1 << (choice % 8)
    elif op == "truncate":
        del raw[pos:]
    elif op == "repeat":
        raw[pos:pos] = raw[pos : pos + length]
    elif op == "delete":
        del raw[pos : pos + length]
    elif op == "splice":
        start = choice % max(1, len(other))
        raw[pos:] = other[start : start + 4 * length]
    else:
        raise ValueError(op)


def mutated(seed: bytes, rng: random.Random, seeds: list[bytes], edits: int = 3) -> bytes:
    """``seed`` after 1..``edits`` random structural mutations (the first byte, which
    selects API/codec/options, is left alone half the time)."""
    raw = bytearray(seed)
    keep = rng.random() < 0.5 and len(raw) > 1
    head = raw[:1] if keep else b""
    body = raw[1:] if keep else raw
    for _ in range(rng.randint(1, edits)):
        mutate(
            body,
            rng.choice(MUTATIONS),
            rng.randrange(1 << 30),
            rng.randrange(1 << 10),
            rng.choice(seeds),
            rng.randint(1, 64),
        )
    return bytes(head + body)
