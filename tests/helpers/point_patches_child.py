"""For ``tests/test_point_patches.py``: installs ``tests.helpers.point_patches`` with a hook
that records each point and, at the driver's, the micro-batch each task's marker group
shows committed; then writes three tasks of micro-batch 3 and commits them, and two tasks
of a batch write. Prints the record as JSON.

    python -m tests.helpers.point_patches_child BOOTSTRAP TOPIC PREFIX
"""

from __future__ import annotations

import json
import sys

from tests.helpers import point_patches

BATCH = 3
PARTITIONS = 3


def main(bootstrap: str, topic: str, prefix: str) -> None:
    seen: list[list] = []

    def record(point: str, **where) -> None:
        from kafka_sink import transactions
        from protocol.client.cluster import KafkaClient

        markers = None
        if point != "before_task_end":
            lookup = transactions.committed_batch.__wrapped__  # not a step of the commit
            with KafkaClient(bootstrap_servers=bootstrap) as client:
                markers = [lookup(client, prefix, p, topic=topic) for p in range(PARTITIONS)]
        seen.append([point, where, markers])

    point_patches.install(record)
    from tests.helpers.transactions import commit, task

    class Broker:
        pass

    broker = Broker()
    broker.bootstrap = bootstrap
    messages = [
        task(broker, topic, prefix, f"s{p}", 5, partition_id=p, batch_id=BATCH)
        for p in range(PARTITIONS)
    ]
    counts = commit(broker, topic, prefix, messages, BATCH)
    batch = [task(broker, topic, f"{prefix}-b", f"b{p}", 5, partition_id=p) for p in (0, 1)]
    batch_counts = commit(broker, topic, f"{prefix}-b", batch)
    print(json.dumps({"seen": seen, "counts": [counts, batch_counts]}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
