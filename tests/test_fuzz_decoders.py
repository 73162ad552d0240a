"""Fuzzing every decoder with structured mutations of valid encodings, bounded in time and
memory.

``test_schema_roundtrip`` already throws random bytes and random byte edits at every
response schema, ``test_records_decode`` flips bytes of record batches and
``test_records_compression`` feeds garbage and truncations to every codec. What this adds:

- frames: a ``FrameBuffer`` and a ``ClientFraming`` with five requests in flight, fed
  mutated streams of valid responses in random-sized pieces (nothing fuzzed them before);
- mutations that aim at length and count fields: values at the edges (2**31 - 1, -1, -2,
  2**30, int16 and int64 limits, 5-byte varints of 2**31 - 1 and 2**32 - 1, zigzag
  negatives) written over valid encodings of every response (every API and version), of
  v2 batches of every codec, transactional and control batches, legacy message sets and
  compressed wrappers, of every codec's payload, and of SCRAM server messages; plus
  repeated and deleted slices (array elements) and splices of two encodings;
- bounds: each input must finish within a second (of the thread's CPU time) and allocate
  at most 8 MB at its peak (``tracemalloc``), and only ``ProtocolError`` (or a subclass; SCRAM also
  ``AuthenticationError``) may escape.

The targets and mutations live in ``tests/fuzz/targets.py``, shared with ``make fuzz``
(atheris). ``PYKAFKA_FUZZ_EXAMPLES`` multiplies the example counts (5 under ``PYKAFKA_SOAK=1``;
``make fuzz`` without atheris runs these with 50).
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.records import accel

from .fuzz.targets import MUTATIONS, TARGETS, check_bounded, mutate
from .helpers.reliability_report import record, soak

SCALE = max(1, int(os.environ.get("PYKAFKA_FUZZ_EXAMPLES", "5" if soak() else "1")))
EXAMPLES = {
    "frames": 200,
    "responses": 400,
    "records": 300,
    "compressed": 200,
    "scram": 80,
    "avro": 200,
}
_SEEDS = {name: target.seeds() for name, target in TARGETS.items()}
_STATS: dict[str, dict] = {name: {} for name in TARGETS}
_SPAN: dict[str, list[float]] = {}  # first start, last end of each target's examples


@pytest.fixture(scope="module", autouse=True)
def fuzz_figures():
    yield
    for name, stats in _STATS.items():
        if not stats:
            continue
        errors = {k: v for k, v in stats.items() if k.startswith("error_")}
        span = _SPAN.get(name, [0.0, 0.0])
        record(
            f"fuzz/{name}",
            section="fuzz",
            what=f"{TARGETS[name].what} (hypothesis, structured mutations)",
            faults=stats["inputs"],
            seconds=span[1] - span[0],
            max_cpu_ms=round(stats["max_ms"], 1),
            max_wall_ms=round(stats["max_wall_ms"], 1),
            max_peak_kb=stats["max_peak_kb"],
            decoded=stats.get("decoded", 0),
            **errors,
        )


def _warm_up(name: str) -> None:
    """Run the seeds once outside the bounds: first use imports the codec libraries."""
    target = TARGETS[name]
    for seed in _SEEDS[name]:
        try:
            target.run(seed)
        except target.allowed:
            pass


for _name in TARGETS:
    _warm_up(_name)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_are_decoded_within_the_bounds(name):
    for seed in _SEEDS[name]:
        check_bounded(TARGETS[name], seed)


def _mutated(seeds: list[bytes], data, *, may_mutate_head: bool) -> bytes:
    """A seed with 1 to 4 structural edits (``MUTATIONS``) past its first byte (a target's
    mode byte), or anywhere in it when ``may_mutate_head`` and hypothesis so draws."""
    raw = bytearray(data.draw(st.sampled_from(seeds), label="seed"))
    keep_head = (
        not may_mutate_head or data.draw(st.booleans(), label="keep first byte") and len(raw) > 1
    )
    head, body = (raw[:1], raw[1:]) if keep_head else (b"", raw)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        mutate(
            body,
            data.draw(st.sampled_from(MUTATIONS), label="op"),
            data.draw(st.integers(0, 1 << 16), label="at"),
            data.draw(st.integers(0, 1 << 10), label="value"),
            data.draw(st.sampled_from(seeds), label="other"),
            data.draw(st.integers(1, 64), label="length"),
        )
    return bytes(head + body)


def _fuzz(name: str, data) -> None:
    check_bounded(TARGETS[name], _mutated(_SEEDS[name], data, may_mutate_head=True), _STATS[name])
    _SPAN[name][1] = time.monotonic()


def _test_for(name: str):
    @settings(
        max_examples=EXAMPLES[name] * SCALE,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def test(data):
        _SPAN.setdefault(name, [time.monotonic(), 0.0])
        _fuzz(name, data)

    test.__doc__ = (
        f"{EXAMPLES[name] * SCALE} structurally mutated inputs for the "
        f"{name!r} target: typed errors only, < 1 s and < 8 MB each."
    )
    return test


test_frames = _test_for("frames")
test_responses = _test_for("responses")
test_records = _test_for("records")
test_compressed = _test_for("compressed")
test_scram_server_messages = _test_for("scram")
test_avro_values = _test_for("avro")


def _records_outcome(data: bytes):
    try:
        out = TARGETS["records"].run(data)
    except ProtocolError as e:
        return type(e), str(e)
    if out is not None:
        out[0].validate(full=True)
    return out


@settings(
    max_examples=EXAMPLES["records"] * SCALE,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_records_decoders_agree(data):
    """The compiled record decoder (protocol/records/accel.py) against the pure path on
    the mutated records inputs: the same rows and next offset, or the same error."""
    blob = _mutated(_SEEDS["records"], data, may_mutate_head=False)
    with accel.forced(False):
        pure = _records_outcome(blob)
    with accel.forced(True):
        check_bounded(TARGETS["records"], blob)
        compiled = _records_outcome(blob)
    if pure is not None and isinstance(pure[0], pa.RecordBatch):
        assert compiled[0].equals(pure[0]) and compiled[1] == pure[1]
    else:
        assert compiled == pure


@settings(max_examples=150 * SCALE, deadline=None)
@given(chunking=st.integers(0, 255), stream=st.binary(max_size=600))
def test_frames_from_random_bytes(chunking, stream):
    """Random byte streams (not mutations) into the framing state machines."""
    check_bounded(TARGETS["frames"], bytes([chunking]) + stream, _STATS["frames"])


def test_chunking_does_not_change_what_framing_decodes():
    """A valid stream of five responses decodes to the same responses whatever the pieces
    it arrives in (1 byte at a time, or in one piece)."""
    from protocol.framing import ClientFraming

    from .fuzz.targets import _EMPTY_REQUEST, _IN_FLIGHT

    stream = _SEEDS["frames"][0][1:]

    def decode(step: int):
        framing = ClientFraming("fuzz", 1 << 20)
        for api, version in _IN_FLIGHT:
            framing.request(api, version, _EMPTY_REQUEST[api.key])
        out = []
        for pos in range(0, len(stream), step):
            out += framing.receive_data(stream[pos : pos + step])
        return out

    whole = decode(len(stream))
    assert [cid for cid, _ in whole] == [0, 1, 2, 3, 4]
    for step in (1, 3, 4, 5, 17):
        assert decode(step) == whole


#: Inputs that once escaped (found by ``make fuzz``), kept as regression tests.
REGRESSIONS = [
    # a record's header count varint overflowing 32 bits: VarintError escaped
    # decode_records (CRC checks off, so the mutation reached the record parser)
    (
        "records",
        "BQAAAAAAAAAGAAAAdP////8C+GGgewAQAAAAAgAAAYvP5WgAAAABi8/laAIAAAAAAAAADAAAAAAA"
        "AAAAAAMMAAADAQEAOgACAgRrMRx2YWx1ZS0xdmFs//////////8xAm4BOgAEBARrMip2YWx1ZS0C"
        "+GGgewAydmFsdWUtMnZhbHVlLTIA",
    ),
]


@pytest.mark.parametrize("name,data", REGRESSIONS)
def test_inputs_found_by_fuzzing(name, data):
    import base64

    assert check_bounded(TARGETS[name], base64.b64decode(data)) is not None
