"""Capture golden record batches written by librdkafka (confluent-kafka) through a real broker.

    .venv/bin/python scripts/capture_golden_batches.py [OUT_DIR]   (default tests/data/golden)

For every case (each codec, headers, null keys and values, a transaction with an abort),
confluent-kafka produces to a Tansu broker; the raw RECORDS bytes of the partition are
fetched with the project's client and written as ``<case>.bin``, and the records as a
confluent-kafka consumer reports them are written as ``<case>.json``. The test
``tests/test_records_golden.py`` decodes the bytes and compares with the JSON.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402

from kafka_testbed import TansuBroker  # noqa: E402
from protocol.client.cluster import KafkaClient  # noqa: E402


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


def messages(case: str):
    """(key, value, headers, timestamp_ms) of each message of a case."""
    out = []
    for i in range(40):
        key = None if i % 5 == 0 else f"{case}-key-{i}".encode()
        value = None if i % 9 == 4 else (f"{case}-value-{i}-" * (1 + i % 4)).encode()
        headers = (
            [("trace", f"t{i}".encode()), ("empty", b""), ("null", None)] if i % 3 == 0 else None
        )
        out.append((key, value, headers, 1_700_000_000_000 + 1000 * i))
    return out


def capture(
    bootstrap: str,
    client: KafkaClient,
    case: str,
    codec: str,
    out_dir: Path,
    transactional: bool = False,
) -> None:
    topic = f"golden-{case}"
    client.create_topics({topic: 1})
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50}
    if transactional:
        conf["transactional.id"] = f"golden-{case}"
    producer = confluent_kafka.Producer(conf)
    batches = [messages(case)[:20], messages(case)[20:]]
    if transactional:
        producer.init_transactions(10)
    for n, batch in enumerate(batches):
        if transactional:
            producer.begin_transaction()
        for key, value, headers, ts in batch:
            producer.produce(
                topic, key=key, value=value, headers=headers, timestamp=ts, partition=0
            )
        producer.flush(10)
        if transactional:
            (producer.abort_transaction if n == 0 else producer.commit_transaction)(10)
    part = client.fetch({(topic, 0): 0}, max_wait_ms=200)[(topic, 0)]
    assert part["error_code"] == 0, part
    (out_dir / f"{case}.bin").write_bytes(bytes(part["records"]))

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"golden-{case}",
            "isolation.level": "read_uncommitted",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = []
    while len(seen) < 40:
        msg = consumer.poll(5)
        if msg is None:
            break
        if msg.error():
            continue
        seen.append(
            {
                "offset": msg.offset(),
                "key": _b64(msg.key()),
                "value": _b64(msg.value()),
                "timestamp": msg.timestamp()[1],
                "timestamp_type": msg.timestamp()[0] - 1,
                "headers": None if not msg.headers() else [[k, _b64(v)] for k, v in msg.headers()],
            }
        )
    consumer.close()
    assert len(seen) == 40, f"{case}: librdkafka reported {len(seen)} records"
    meta = {
        "case": case,
        "codec": codec,
        "transactional": transactional,
        "aborted_first_offset": 0 if transactional else None,
        "librdkafka": confluent_kafka.libversion()[0],
        "records": seen,
    }
    (out_dir / f"{case}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{case}: {len((out_dir / f'{case}.bin').read_bytes())} bytes, {len(seen)} records")


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "golden"
    out_dir.mkdir(parents=True, exist_ok=True)
    with TansuBroker() as broker, KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            capture(broker.bootstrap, client, codec, codec, out_dir)
        capture(broker.bootstrap, client, "transaction", "none", out_dir, transactional=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
