"""The stream reader under PySpark 4.1's calls, replayed on the stub client of
``test_source_streaming`` (``make test-versions`` runs the real PySpark 4.1).

PySpark 4.1 gives Python sources no admission control: Spark calls ``latestOffset()`` with
no start, and for a fresh query before ``initialOffset()`` (``MicroBatchExecution`` asks for
the start only in ``runBatch``).
"""

from __future__ import annotations

import pytest

from kafka_source import admission
from kafka_source.options import parse_reader_options
from protocol.errors import ConfigError

from .helpers.streaming import A0, A1, StubClient, stub_reader


def test_fresh_query_from_latest_binds_its_start_at_the_first_latest_offset():
    client = StubClient({A0: 10, A1: 3})
    reader = stub_reader(client, startingOffsets="latest")
    end = reader.latestOffset()  # batch 0's end, logged before its start is asked for
    assert end == {"a": {"0": 10, "1": 3}}
    client.latest = {A0: 12, A1: 3}  # records arrive before runBatch asks for the start
    assert reader.initialOffset() == end  # the start bound above, not "latest" now
    assert reader.partitions(end, end) == []  # batch 0 is empty, never start > end
    assert reader.latestOffset() == {"a": {"0": 12, "1": 3}}


def test_fresh_query_from_earliest_reads_from_the_first_batch():
    client = StubClient({A0: 10})
    reader = stub_reader(client, startingOffsets="earliest")
    end = reader.latestOffset()
    assert end == {"a": {"0": 10}}
    start = reader.initialOffset()
    assert start == {"a": {"0": 0}}
    assert [tuple(p.range[:4]) for p in reader.partitions(start, end)] == [("a", 0, 0, 10)]


@pytest.mark.parametrize(
    "name, value",
    [("maxOffsetsPerTrigger", "10"), ("minOffsetsPerTrigger", "10"), ("maxBytesPerTrigger", "1m")],
)
def test_rate_options_are_refused_without_admission_control(monkeypatch, name, value):
    options = parse_reader_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a", name: value},
        for_streaming=True,
    )
    admission.check_pyspark_supports(options)  # this PySpark has admission control
    monkeypatch.setattr(admission, "ADMISSION_CONTROL", False)
    with pytest.raises(ConfigError, match=f"^{name} needs PySpark 4.2 or later: PySpark "):
        admission.check_pyspark_supports(options)
    plain = parse_reader_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a"}, for_streaming=True
    )
    admission.check_pyspark_supports(plain)  # nothing to refuse
