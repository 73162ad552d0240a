"""A steady stream of records for the ``scale`` section's micro-batches (scale_cases.py):
``rate`` records a second of ``size`` bytes, round robin over every partition of the topic,
with confluent-kafka (run by the bench's own Python: the JVM child's PySpark 4.2.0
environment has no confluent-kafka) until stdin closes or SIGTERM.

    python steady_producer.py BOOTSTRAP TOPIC PARTITIONS RATE [SIZE]
"""

from __future__ import annotations

import signal
import sys
import threading
import time


def main(bootstrap: str, topic: str, partitions: int, rate: float, size: int = 100) -> None:
    import confluent_kafka

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"}
    )
    value = b"v" * size
    sent, began = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while sent < due:
            producer.produce(topic, value=value, partition=sent % partitions)
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(10)
    print(f"steady producer: {sent} records in {time.monotonic() - began:.1f} s", flush=True)


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        float(sys.argv[4]),
        *(int(a) for a in sys.argv[5:6]),
    )
