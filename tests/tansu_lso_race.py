"""Reproduces a race in Tansu's transaction bookkeeping (not a test: it shows a third-party
bug in 9 runs of 100 here, so it runs by hand, not in ``make test``).

Two transactional ids each leave a transaction open on the same two partitions (a crashed
stream's two write tasks). Then both ids are initialised again at the same moment, as a
restarted stream's tasks do: each InitProducerId aborts its id's open transaction. Both
ids then write and commit a new transaction. By the log every transaction ended (each has
its ABORT or COMMIT marker), and so it is on Kafka. Now and then Tansu keeps the new,
committed transactions open in its bookkeeping for good: a read_committed Fetch answers a
last stable offset stuck at their first offset, and ListOffsets(read_committed) latest
answers 0. Reading Tansu 0.6.0's storage engine (dynostore) suggests why: when one abort
finishes both transactions before the other writes its marker, that marker brings the
finished transaction back into the bookkeeping as an ended transaction with records, and
a later transaction that overlaps it waits for it forever.

    python -m tests.tansu_lso_race [RUNS]     # prints each run that got stuck
"""

from __future__ import annotations

import sys
import threading
import uuid

import confluent_kafka

from kafka_testbed import TansuBroker
from protocol import transactions as txn
from protocol.cluster import KafkaClient
from tests.broker_setup import create_topic
from tests.txn_referee import open_transactions, stable_offsets_behind


def _producer(bootstrap: str, tid: str) -> confluent_kafka.Producer:
    return confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                     "transactional.id": tid, "linger.ms": 0})


def _open_transaction(bootstrap: str, topic: str, tid: str, tag: str) -> None:
    p = _producer(bootstrap, tid)
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, f"{tag}{i}".encode(), partition=i % 2)
    p.flush(10)


def one_run(broker, clients, n: int) -> list[str]:
    """One crash-and-restart on a fresh topic; the partitions Tansu keeps behind."""
    topic = f"lso-race-{n}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic, 2)
    tids = [f"{topic}-a", f"{topic}-b"]
    for tid in tids:  # the crashed run: left open
        _open_transaction(broker.bootstrap, topic, tid, "crashed-")
    for client, tid in zip(clients, tids):  # the coordinator known, connections warm
        txn.init_producer_id(client, f"{tid}-warm", 60_000)
    start = threading.Barrier(len(tids))

    def init(client, tid):
        start.wait()
        txn.init_producer_id(client, tid, 60_000)  # aborts what the id left open

    threads = [threading.Thread(target=init, args=pair) for pair in zip(clients, tids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    producers = [_producer(broker.bootstrap, tid) for tid in tids]
    for p in producers:  # the restarted run: written, then committed
        p.init_transactions(10)
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, b"restarted", partition=i % 2)
        p.flush(10)
    for p in producers:
        p.commit_transaction(10)
    assert open_transactions(broker.bootstrap, topic, 2) == []  # by the log, all ended
    return stable_offsets_behind(broker.bootstrap, topic, 2, wait_s=2.0)


def main(runs: int) -> None:
    broker = TansuBroker()
    broker.start()
    clients = [KafkaClient(bootstrap_servers=broker.bootstrap) for _ in range(2)]
    stuck = 0
    try:
        for n in range(runs):
            behind = one_run(broker, clients, n)
            if behind:
                stuck += 1
                print(f"run {n}: {'; '.join(behind)}", flush=True)
    finally:
        for c in clients:
            c.close()
        broker.stop()
    print(f"Tansu kept ended transactions open after {stuck} of {runs} runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
