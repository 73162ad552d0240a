"""The schema decoder's fast paths are taken: runs of fixed-width fields read with one
unpack, arrays of fixed-width primitives and of all-fixed-width structs read at once, empty
tagged sections and one-byte array counts read inline. Each test counts the fast reader at
work (or the slow one left alone), so it fails when its path is switched off; the values
decoded are checked against what was encoded."""

from __future__ import annotations

from typing import Any

import pytest

from protocol import primitives, schema_fast_reads, tagged_fields
from protocol.schema import Message
from protocol.schemas import LIST_OFFSETS, METADATA


def _fresh(message: Message) -> Message:
    """The same schema compiled anew (the spies in place), not the shared compiled one."""
    return Message(message.versions, message.fields, message.flexible)


def _spy(monkeypatch, name: str) -> list[str]:
    """Replace the reader factory ``schema_fast_reads.<name>`` with one whose readers count
    their calls in the list returned."""
    real = getattr(schema_fast_reads, name)
    calls: list[str] = []

    def make(*args: Any, **kwargs: Any):
        reader = real(*args, **kwargs)

        def counted(*a: Any):
            calls.append(name)
            return reader(*a)

        return counted

    monkeypatch.setattr(schema_fast_reads, name, make)
    return calls


def _metadata_answer(partitions: int) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": 1,
                        "leader_epoch": 5,
                        "replica_nodes": [1, 2, 3],
                        "isr_nodes": [1, 2],
                        "offline_replicas": [],
                    }
                    for i in range(partitions)
                ],
            }
        ],
    }


def _list_offsets_answer(partitions: int) -> dict[str, Any]:
    rows = [
        {"partition_index": i, "error_code": 0, "timestamp": -1, "offset": 7 * i, "leader_epoch": 2}
        for i in range(partitions)
    ]
    return {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": rows}]}


def test_runs_of_fixed_width_fields_and_arrays_of_them_are_unpacked_at_once(monkeypatch):
    """A Metadata partition's error_code, partition_index, leader_id and leader_epoch are
    one unpack (the fused reader, once per partition); its replica lists one each."""
    fused = _spy(monkeypatch, "fused_reader")
    arrays = _spy(monkeypatch, "fixed_array_reader")
    message = _fresh(METADATA.response)
    for version in (1, 12):  # not flexible, flexible
        value = _metadata_answer(4)
        if version == 1:
            value = {k: v for k, v in value.items() if k not in ("throttle_time_ms", "cluster_id")}
        fused.clear(), arrays.clear()
        decoded, _ = message.decode(version, bytes(METADATA.response.encode(version, value)))
        parts = decoded["topics"][0]["partitions"]
        assert [q["partition_index"] for q in parts] == list(range(4))
        assert [q["leader_epoch"] for q in parts] == [5 if version == 12 else -1] * 4  # v1: none
        assert [q["replica_nodes"] for q in parts] == [[1, 2, 3]] * 4
        assert len(fused) >= 4  # at least one unpack per partition
        assert len(arrays) == 4 * (3 if version == 12 else 2)  # replicas, isr (, offline)


def test_an_array_of_all_fixed_width_structs_is_read_by_rows(monkeypatch):
    """A ListOffsets answer's partitions: all rows unpacked together and turned into dicts
    by one comprehension (``row_dicts``), not element by element."""
    rows_readers = _spy(monkeypatch, "fixed_rows_reader")
    as_dicts = _spy(monkeypatch, "row_dicts")
    fused = _spy(monkeypatch, "fused_reader")
    message = _fresh(LIST_OFFSETS.response)
    value = _list_offsets_answer(50)
    for version in (4, 8):  # not flexible, flexible
        rows_readers.clear(), as_dicts.clear(), fused.clear()
        decoded, _ = message.decode(version, bytes(LIST_OFFSETS.response.encode(version, value)))
        assert decoded["topics"][0]["partitions"] == value["topics"][0]["partitions"]
        assert rows_readers == ["fixed_rows_reader"] and as_dicts == ["row_dicts"]
        assert not fused  # no partition read on its own


def test_empty_tagged_sections_and_short_array_counts_are_read_inline(monkeypatch):
    """A flexible message whose structs carry no tagged fields: no tagged section is read
    or written the general way, and no compact array count of one byte goes through the
    varint reader; a struct that carries tags is still read the general way."""
    counts: dict[str, int] = {}

    def counting(name: str, real):
        def counted(*a: Any, **k: Any):
            counts[name] = counts.get(name, 0) + 1
            return real(*a, **k)

        return counted

    for name in ("read_tagged_section", "write_tagged_section"):
        monkeypatch.setattr(tagged_fields, name, counting(name, getattr(tagged_fields, name)))
    monkeypatch.setattr(
        primitives, "read_array_count", counting("read_array_count", primitives.read_array_count)
    )
    message = _fresh(METADATA.response)  # compiled with the counting array count reader
    value = _metadata_answer(5)
    data = bytes(message.encode(12, value))
    decoded, _ = message.decode(12, data)
    assert decoded["topics"][0]["partitions"][4]["isr_nodes"] == [1, 2]
    assert counts == {}
    value["topics"][0][tagged_fields.UNKNOWN_TAGS] = {3: b"\x01"}
    tagged, _ = message.decode(12, bytes(message.encode(12, value)))
    assert tagged["topics"][0][tagged_fields.UNKNOWN_TAGS] == {3: b"\x01"}
    assert counts == {"read_tagged_section": 1, "write_tagged_section": 1}


@pytest.mark.parametrize("count", [0, 1, 126, 127, 300])
def test_the_inline_array_count_agrees_with_the_varint_one(count):
    """Around the one-byte limit of a compact count the fast and the general readers meet:
    every size decodes to what was encoded."""
    value = _list_offsets_answer(2)
    value["topics"] = [{"name": f"t{i}", "partitions": []} for i in range(count)]
    data = bytes(LIST_OFFSETS.response.encode(8, value))
    assert LIST_OFFSETS.response.decode(8, data)[0]["topics"] == value["topics"]
    meta = _metadata_answer(1)
    meta["topics"][0]["partitions"][0]["replica_nodes"] = list(range(count))
    data = bytes(METADATA.response.encode(12, meta))
    assert METADATA.response.decode(12, data)[0]["topics"][0]["partitions"][0][
        "replica_nodes"
    ] == list(range(count))
