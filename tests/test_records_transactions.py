"""read_committed over real transactional batches: librdkafka's transactional producer
commits and aborts on Apache Kafka, Kafka's read_committed Fetch names the aborted
transactions, and our decoder drops exactly those records.

The AbortedTransactions list Kafka sends is checked against one built from the log's own
ABORT markers, as the protocol guide defines it (the producer id and the first offset of
each aborted transaction), so a wrong list from either side shows.
"""

import confluent_kafka

from protocol.client.cluster import KafkaClient
from protocol.records import decode_records
from protocol.records.batch import ABORT, control_type, iter_batches, parse_header
from protocol.records.reference_decode import parse_records

from .helpers.txn_referee import stable_offsets_behind


def aborted_list(records: bytes) -> list[tuple[int, int]]:
    """(producer_id, first_offset) of every aborted transaction in ``records``."""
    first_offset: dict[int, int] = {}
    aborted = []
    for pos, base, size, _ in iter_batches(records):
        h = parse_header(records, pos)
        if h.producer_id < 0:
            continue
        if not h.attributes & 0x20:  # a data batch: remember where its transaction began
            first_offset.setdefault(h.producer_id, base)
            continue
        data = bytes(records[pos + 61 : pos + size])
        marker = control_type(parse_records(data, h)[0].key)
        start = first_offset.pop(h.producer_id, None)
        if marker == ABORT and start is not None:
            aborted.append((h.producer_id, start))
    return aborted


def test_read_committed_drops_the_aborted_transactions_librdkafka_wrote(kafka, topic_name):
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: 1})
        p = confluent_kafka.Producer(
            {"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{topic_name}"}
        )
        p.init_transactions(30)
        for outcome, n in (("commit", 10), ("abort", 5), ("commit", 7), ("abort", 3)):
            p.begin_transaction()
            for i in range(n):
                p.produce(topic_name, value=f"{outcome}-{i}".encode(), partition=0)
            p.flush(30)
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
        assert stable_offsets_behind(kafka.bootstrap, topic_name, 1) == []  # markers written
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        records = bytes(part["records"])

    aborted = aborted_list(records)
    assert len(aborted) == 2 and aborted[0][1] == 11  # 10 records + 1 commit marker before
    sent = sorted((a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"])
    assert sent == aborted  # what Kafka says is what the log shows
    committed, next_offset = decode_records(
        records,
        topic=topic_name,
        partition=0,
        start_offset=0,
        read_committed=True,
        aborted_transactions=sent,
    )
    assert committed.column("value").to_pylist() == (
        [b"commit-%d" % i for i in range(10)] + [b"commit-%d" % i for i in range(7)]
    )
    assert next_offset == part["high_watermark"]  # past every marker and aborted batch
    everything, _ = decode_records(records, topic=topic_name, partition=0, start_offset=0)
    assert everything.num_rows == 25  # read_uncommitted keeps aborted records
