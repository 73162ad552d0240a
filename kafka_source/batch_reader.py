"""``spark.read.format("pykafka")``: plan on the driver, fetch on the executors."""

from __future__ import annotations

import sys
from typing import Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from protocol.cluster import KafkaClient

from .fetcher import read_range
from .offset_reader import OffsetReader
from .options import ReaderOptions
from .offset_specs import OffsetRange
from .planning import plan_batch


class KafkaInputPartition(InputPartition):
    """One offset range; small and picklable."""

    def __init__(self, rng: OffsetRange):
        super().__init__(tuple(rng))
        self.range = rng

    def __repr__(self) -> str:
        r = self.range
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: ReaderOptions):
        self.options = options
        self.pushed = None  # a pushdown.Narrowing, set by pushFilters

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        with KafkaClient(o.client_config) as client:
            offsets = OffsetReader(client, o.fetch_offset_num_retries,
                                   o.fetch_offset_retry_interval_ms)
            ranges = plan_batch(o, offsets, narrowing=self.pushed)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: KafkaInputPartition) -> Iterator:
        yield from read_range(self.options, partition.range)


class KafkaPushdownBatchReader(KafkaBatchReader):
    """The batch reader with filter pushdown (``spark.sql.python.filterPushdown.enabled``).

    A separate class because Spark refuses a reader that implements ``pushFilters`` while
    that setting is off."""

    def pushFilters(self, filters):
        from .pushdown import narrowing_from_filters
        filters = list(filters)
        self.pushed = narrowing_from_filters(filters)
        # Every filter is still evaluated by Spark: pushdown only narrows what is read,
        # so the result is exactly the unpushed query's.
        return filters


def pushdown_enabled() -> bool:
    """Whether Spark calls ``DataSource.reader()`` with filter pushdown on. Python data
    sources get no view of ``spark.sql.python.filterPushdown.enabled``, so look at the
    caller: with pushdown on, Spark builds the reader in its pushdown worker
    (``data_source_pushdown_filters``); otherwise its planning worker holds the setting in
    a local ``enable_pushdown``. When neither is found, pushdown is off (always safe)."""
    frame = sys._getframe(1)
    for _ in range(6):
        if frame is None:
            break
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        value = frame.f_locals.get("enable_pushdown")
        if isinstance(value, bool):
            return value
        frame = frame.f_back
    return False
