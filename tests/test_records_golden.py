"""Golden batches written by librdkafka (confluent-kafka) through a real broker, captured
by scripts/capture_golden_batches.py: our decoder must report exactly the records
librdkafka's own consumer reported for the same bytes."""

import base64
import json
from pathlib import Path

import pytest

from protocol.records import decode_records
from protocol.records.batch import parse_header

from .helpers.decoder_paths import decoder_path  # noqa: F401 (autouse: both decoders)

GOLDEN = Path(__file__).parent / "data" / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.bin"))


def _b(value):
    return None if value is None else base64.b64decode(value)


def expected_rows(meta, keep=lambda r: True):
    return [
        (
            r["offset"],
            _b(r["key"]),
            _b(r["value"]),
            r["timestamp"],
            r["timestamp_type"],
            None if r["headers"] is None else [(k, _b(v)) for k, v in r["headers"]],
        )
        for r in meta["records"]
        if keep(r)
    ]


def decoded_rows(batch):
    cols = batch.to_pydict()
    return [
        (
            o,
            k,
            v,
            int(ts.timestamp() * 1000),
            tt,
            None if h is None else [(x["key"], x["value"]) for x in h],
        )
        for o, k, v, ts, tt, h in zip(
            cols["offset"],
            cols["key"],
            cols["value"],
            cols["timestamp"],
            cols["timestampType"],
            cols["headers"],
        )
    ]


def test_every_case_is_captured():
    assert CASES == ["gzip", "lz4", "none", "snappy", "transaction", "zstd"]


@pytest.mark.parametrize("case", CASES)
def test_golden_batches_decode_to_what_librdkafka_reported(case):
    data = (GOLDEN / f"{case}.bin").read_bytes()
    meta = json.loads((GOLDEN / f"{case}.json").read_text())
    batch, next_offset = decode_records(
        data, topic=f"golden-{case}", partition=0, start_offset=0, include_headers=True
    )
    assert decoded_rows(batch) == expected_rows(meta)
    assert next_offset == meta["records"][-1]["offset"] + 1 + (1 if meta["transactional"] else 0)


def test_golden_transaction_under_read_committed():
    data = (GOLDEN / "transaction.bin").read_bytes()
    meta = json.loads((GOLDEN / "transaction.json").read_text())
    producer_id = parse_header(data, 0).producer_id
    batch, _ = decode_records(
        data,
        topic="golden-transaction",
        partition=0,
        start_offset=0,
        include_headers=True,
        read_committed=True,
        aborted_transactions=[(producer_id, 0)],
    )
    assert decoded_rows(batch) == expected_rows(meta, lambda r: r["offset"] > 20)


@pytest.mark.parametrize("case", CASES)
def test_golden_batches_from_every_start_offset(case):
    data = (GOLDEN / f"{case}.bin").read_bytes()
    meta = json.loads((GOLDEN / f"{case}.json").read_text())
    for start in (0, 7, 20, 33):
        batch, _ = decode_records(
            data,
            topic="g",
            partition=0,
            start_offset=start,
            end_offset=start + 5,
            include_headers=True,
        )
        assert decoded_rows(batch) == [r for r in expected_rows(meta) if start <= r[0] < start + 5]
