"""Spark's own cost of a Python data source, with no Kafka: the floor under the Spark rows.

Format ``benchfloor``:

- read: every input partition yields ready-made Arrow batches with the pykafka schema
  (headers included; ``headers=false``: the reader's seven columns, its default) until it
  has produced ``rows`` rows -- what Spark spends taking Arrow
  batches from Python workers and turning them into rows, with nothing to fetch or decode;
- write: the task consumes the Arrow batches Spark hands it and drops them -- what Spark
  spends turning rows into Arrow batches for Python workers, with nothing to encode or send;
- stream: the read's rows as a stream that offers them all at once (one micro-batch under
  Trigger.AvailableNow) -- what Spark spends starting a Python streaming source and running
  micro-batches (its planner process, offset and commit logs), with nothing to look up.

Format ``benchclock`` (the streaming latency floor): a stream whose offsets are the clock
(``offsets=kafka``: shaped as a Kafka source's over ``partitions``, one task a micro-batch:
the scale section's floor).
It stands for a producer sending ``rate`` records a second round robin to ``partitions``
partitions: a micro-batch from offset (millisecond) ``a`` to ``b`` holds the records
"sent" in between, each with its send time (seconds, as text) as its value, in the pykafka
schema without headers -- what Spark's Python-source machinery costs a micro-batch, with
no Kafka at all.

Shipped to the workers with ``SparkContext.addPyFile`` (pytest does not collect it).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

FORMAT = "benchfloor"
CLOCK_FORMAT = "benchclock"
BATCH_ROWS = 10_000


def _batch(first: int, n: int, value_size: int, partition: int) -> pa.RecordBatch:
    import numpy as np
    from bench_data import columns

    from protocol.records import SCHEMA_WITH_HEADERS

    keys, values, headers, ts = columns(first, n, value_size)
    return pa.RecordBatch.from_arrays(
        [
            keys,
            values,
            pa.array(["bench-floor"] * n, pa.string()),
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(np.arange(first, first + n, dtype=np.int64)),
            pa.array(ts * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(n, dtype=np.int32)),
            headers.cast(SCHEMA_WITH_HEADERS.field("headers").type),
        ],
        schema=SCHEMA_WITH_HEADERS,
    )


#: ``shape=avro``: the columns of ``spark.read.format("pykafka")`` with ``valueFormat=avro``
#: for the avro section's record (avro_cases.RECORD), no headers.
AVRO_DDL = (
    "key binary, value struct<id: bigint, sensor: string, value: double, "
    "ok: boolean, at: timestamp>, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, valueSchemaId int"
)


def _avro_batch(first: int, n: int, partition: int) -> pa.RecordBatch:
    import numpy as np
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = to_arrow_schema(
        StructType(
            [
                StructField("key", BinaryType()),
                StructField(
                    "value",
                    StructType(
                        [
                            StructField("id", LongType()),
                            StructField("sensor", StringType()),
                            StructField("value", DoubleType()),
                            StructField("ok", BooleanType()),
                            StructField("at", TimestampType()),
                        ]
                    ),
                ),
                StructField("topic", StringType()),
                StructField("partition", IntegerType()),
                StructField("offset", LongType()),
                StructField("timestamp", TimestampType()),
                StructField("timestampType", IntegerType()),
                StructField("valueSchemaId", IntegerType()),
            ]
        ),
        timezone="UTC",
    )
    ids = np.arange(first, first + n, dtype=np.int64)
    value = pa.StructArray.from_arrays(
        [
            pa.array(ids),
            pa.array([f"sensor-{i % 1000}" for i in range(first, first + n)]),
            pa.array(ids * 0.5),
            pa.array(ids & 1 == 1),
            pa.array(1_704_067_200_000_000 + ids * 1000, pa.timestamp("us", tz="UTC")),
        ],
        fields=list(schema.field("value").type),
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(n, pa.binary()),
            value,
            pa.array(["bench-floor"] * n, pa.string()),
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(ids),
            pa.array(1_704_067_200_000_000 + ids * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(n, dtype=np.int32)),
            pa.array(np.ones(n, dtype=np.int32)),
        ],
        schema=schema,
    )


class _Partition(InputPartition):
    def __init__(self, index: int, rows: int, value_size: int, shape: str = "kafka"):
        super().__init__(index)
        self.index, self.rows, self.value_size = index, rows, value_size
        self.shape = shape


class _Reader(DataSourceReader):
    def __init__(
        self,
        partitions: int,
        rows: int,
        value_size: int,
        shape: str = "kafka",
        batch_rows: int = BATCH_ROWS,
        headers: bool = True,
    ):
        self.n, self.rows, self.value_size = partitions, rows, value_size
        self.shape, self.batch_rows, self.headers = shape, batch_rows, headers

    def partitions(self):
        per = self.rows // self.n
        return [
            _Partition(i, per + (1 if i < self.rows % self.n else 0), self.value_size, self.shape)
            for i in range(self.n)
        ]

    def read(self, partition: _Partition):
        n = min(self.batch_rows, partition.rows)
        batch = (
            _avro_batch(0, n, partition.index)
            if getattr(partition, "shape", "") == "avro"
            else _batch(0, n, partition.value_size, partition.index)
        )
        if not getattr(self, "headers", True) and getattr(partition, "shape", "") != "avro":
            from protocol.records import SCHEMA  # the reader's seven columns, no headers

            batch = pa.RecordBatch.from_arrays(batch.columns[: len(SCHEMA)], schema=SCHEMA)
        left = partition.rows
        while left > 0:
            yield batch if left >= batch.num_rows else batch.slice(0, left)
            left -= batch.num_rows


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets count rows: all ``rows`` are there from the start."""

    def __init__(self, partitions: int, rows: int, value_size: int):
        self.batch = _Reader(partitions, rows, value_size)

    def initialOffset(self):
        return {"rows": 0}

    def prepareForTriggerAvailableNow(self):
        pass

    def latestOffset(self, start=None, limit=None):
        return {"rows": self.batch.rows}

    def partitions(self, start, end):
        rows = end["rows"] - start["rows"]
        return _Reader(self.batch.n, rows, self.batch.value_size).partitions() if rows else []

    def read(self, partition):
        return self.batch.read(partition)

    def commit(self, end):
        pass


class _ClockPartition(InputPartition):
    def __init__(self, index: int, start_ms: int, end_ms: int):
        super().__init__(index)
        self.index, self.start_ms, self.end_ms = index, start_ms, end_ms


class _ClockStreamReader(DataSourceStreamReader):
    """Offsets are the clock in milliseconds; record ``k`` of the stream is sent at
    ``k / rate`` seconds, to partition ``k % partitions``."""

    def __init__(self, partitions: int, rate: float):
        self.n, self.rate = partitions, rate

    @staticmethod
    def _now_ms() -> int:
        import time

        return int(time.time() * 1000)

    def initialOffset(self):
        return {"ms": self._now_ms()}

    def latestOffset(self):
        return {"ms": self._now_ms()}

    def partitions(self, start, end):
        a, b = start["ms"], end["ms"]
        return [_ClockPartition(i, a, b) for i in range(self.n)] if b > a else []

    def read(self, partition: _ClockPartition):
        import math

        import numpy as np

        from protocol.records import SCHEMA

        # records k with start < k / rate * 1000 <= end, those of this partition (all of
        # them for index -1)
        first = math.floor(partition.start_ms * self.rate / 1000) + 1
        last = math.floor(partition.end_ms * self.rate / 1000)
        ks = np.arange(first, last + 1, dtype=np.int64)
        if partition.index >= 0:
            ks = ks[ks % self.n == partition.index]
        if not len(ks):
            return
        sent = ks / self.rate
        n = len(ks)
        yield pa.RecordBatch.from_arrays(
            [
                pa.nulls(n, pa.binary()),
                pa.array([b"%.6f" % t for t in sent], pa.binary()),
                pa.array(["bench-clock"] * n, pa.string()),
                pa.array((ks % self.n).astype(np.int32)),
                pa.array(ks),
                pa.array((sent * 1e6).astype(np.int64), pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, dtype=np.int32)),
            ],
            schema=SCHEMA,
        )

    def commit(self, end):
        pass


class _KafkaShapedClockStreamReader(_ClockStreamReader):
    """The clock stream with offsets shaped as a Kafka source's over ``partitions``
    partitions (``{"bench-clock": {"0": ms, ...}}``, in the latest-offset report too) and
    each micro-batch's records in one task, as our source plans a small micro-batch: what
    Spark costs a micro-batch whose offsets name that many partitions, with no Kafka
    (the scale section's floor beside its micro-batch points)."""

    def __init__(self, partitions: int, rate: float):
        super().__init__(partitions, rate)
        self._latest: dict | None = None

    def _offsets(self) -> dict:
        ms = self._now_ms()
        return {"bench-clock": {str(i): ms for i in range(self.n)}}

    def initialOffset(self):
        return self._offsets()

    def latestOffset(self, start=None, limit=None):
        self._latest = self._offsets()
        return self._latest

    def reportLatestOffset(self):
        return self._latest

    def partitions(self, start, end):
        a, b = start["bench-clock"]["0"], end["bench-clock"]["0"]
        return [_ClockPartition(-1, a, b)] if b > a else []


class ClockDataSource(DataSource):
    @classmethod
    def name(cls):
        return CLOCK_FORMAT

    def schema(self):
        from kafka_source.spark_schema import kafka_schema_ddl

        return kafka_schema_ddl(False)

    def streamReader(self, schema):
        o = self.options
        reader = (
            _KafkaShapedClockStreamReader if o.get("offsets") == "kafka" else _ClockStreamReader
        )
        return reader(int(o.get("partitions", 4)), float(o.get("rate", 400)))


class _Commit(WriterCommitMessage):
    def __init__(self, rows: int):
        self.rows = rows


class _Writer(DataSourceArrowWriter):
    def write(self, iterator):
        return _Commit(sum(b.num_rows for b in iterator))

    def commit(self, messages):
        pass

    def abort(self, messages):
        pass


class FloorDataSource(DataSource):
    @classmethod
    def name(cls):
        return FORMAT

    def schema(self):
        if self.options.get("shape") == "avro":
            return AVRO_DDL
        from kafka_source.spark_schema import kafka_schema_ddl

        return kafka_schema_ddl(self.options.get("headers", "true") == "true")

    def reader(self, schema):
        o = self.options
        return _Reader(
            int(o.get("partitions", 4)),
            int(o["rows"]),
            int(o.get("valueSize", 100)),
            o.get("shape", "kafka"),
            int(o.get("batchRows", BATCH_ROWS)),
            o.get("headers", "true") == "true",
        )

    def streamReader(self, schema):
        o = self.options
        return _StreamReader(
            int(o.get("partitions", 4)), int(o["rows"]), int(o.get("valueSize", 100))
        )

    def writer(self, schema, overwrite):
        return _Writer()
