"""The streaming progress the lag tests read."""

from __future__ import annotations


# A progress report as Spark 4 writes it for a pykafka source (shape copied from a run:
# the description names Spark's Python stream class, not the format).
PROGRESS = {
    "id": "88ee6b30-ee8e-4e26-a4a7-4419ace53bd8",
    "runId": "f532a934",
    "name": "q",
    "timestamp": "2026-11-24T05:16:14.800Z",
    "batchId": 7,
    "numInputRows": 30,
    "durationMs": {"latestOffset": 2, "triggerExecution": 40},
    "stateOperators": [],
    "sources": [
        {
            "description": "org.apache.spark.sql.execution.datasources.v2.python."
            "PythonMicroBatchStreamWithTriggerAvailableNow@3029613b",
            "startOffset": {"a": {"0": 0, "1": 5}, "b": {"0": 0}},
            "endOffset": {"a": {"0": 10, "1": 15}, "b": {"0": 5}},
            "latestOffset": {"a": {"0": 10, "1": 40}, "b": {"0": 6}},
            "numInputRows": 30,
            "inputRowsPerSecond": 0.0,
            "processedRowsPerSecond": 0.0,
        },
        {
            "description": "RateStreamV2[rowsPerSecond=1, rampUpTimeSeconds=0, numPartitions=2",
            "startOffset": 3,
            "endOffset": 4,
            "latestOffset": None,
            "numInputRows": 2,
            "metrics": {},
        },
    ],
    "sink": {"description": "NoopTable", "numOutputRows": 30},
}
