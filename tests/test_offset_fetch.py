"""OffsetFetch is built and read once (``protocol.client.group_offsets.fetch_offsets``): the
group's reader (``KafkaClient.committed_offsets``) and the transactional writer
(``protocol.client.transactions.fetch_stable_offsets``) get the same answer from the same
response, errors included. No broker: a stand-in coordinator answers."""

from __future__ import annotations

import pytest
from protocol.client import transactions as txn
from protocol.errors import BrokerError
from protocol.client.group_offsets import GroupOffsets

GROUP = "g"


class _Coordinator:
    """Answers every OffsetFetch with ``response`` and remembers the requests."""

    def __init__(self, response: dict) -> None:
        self.response, self.requests = response, []

    def version_for(self, api, max_version=None):
        return max_version

    def request(self, api, body, version):
        self.requests.append((api.name, body, version))
        return self.response


class _Client(GroupOffsets):
    """Just what ``fetch_offsets`` uses of a ``KafkaClient``: one attempt, no retries."""

    def __init__(self, response: dict) -> None:
        self.conn = _Coordinator(response)

    def coordinator(self, key, key_type=0):
        return self.conn

    def retrying(self, what, attempt, timeout_ms=None):
        return attempt()


def _partition(index, offset, error=0, metadata=""):
    return {
        "partition_index": index,
        "committed_offset": offset,
        "metadata": metadata,
        "error_code": error,
    }


def _response(partitions, group_error=0):
    return {
        "groups": [
            {
                "group_id": GROUP,
                "error_code": group_error,
                "topics": [{"name": "t", "partitions": partitions}],
            }
        ]
    }


def _both(response):
    """(committed_offsets' answer or error, fetch_stable_offsets' answer or error)."""
    out = []
    for call in (
        lambda c: c.committed_offsets(GROUP, [("t", 0), ("t", 1)]),
        lambda c: txn.fetch_stable_offsets(c, GROUP, [("t", 0), ("t", 1)]),
    ):
        client = _Client(response)
        try:
            out.append(("ok", call(client), client.conn.requests))
        except BrokerError as e:
            out.append(("error", (type(e), e.code, str(e)), client.conn.requests))
    return out


def test_both_callers_read_the_same_offsets():
    reader, writer = _both(_response([_partition(0, 5, metadata="m"), _partition(1, -1)]))
    assert reader[1] == {("t", 0): 5, ("t", 1): -1}
    assert writer[1] == {("t", 0): (5, "m"), ("t", 1): (-1, "")}
    ((_, reader_body, v1),) = reader[2]
    ((_, writer_body, v2),) = writer[2]
    assert v1 == v2 and not reader_body["require_stable"] and writer_body["require_stable"]
    assert {**reader_body, "require_stable": True} == writer_body


@pytest.mark.parametrize(
    "response",
    [
        _response([], group_error=30),  # GROUP_AUTHORIZATION_FAILED
        _response([_partition(0, -1, error=29), _partition(1, 3)]),  # TOPIC_AUTHORIZATION_FAILED
        _response([_partition(0, 2), _partition(1, -1, error=3)]),  # UNKNOWN_TOPIC_OR_PARTITION
    ],
    ids=["group-refused", "topic-refused", "partition-error"],
)
def test_both_callers_raise_the_same_error(response):
    reader, writer = _both(response)
    assert reader[0] == writer[0] == "error"
    assert reader[1] == writer[1]


def test_an_old_single_group_answer_is_read_alike():
    """OffsetFetch before v8 answers one group at the top level."""
    old = {"error_code": 0, "topics": [{"name": "t", "partitions": [_partition(0, 7)]}]}
    reader, writer = _both(old)
    assert reader[1] == {("t", 0): 7}
    assert writer[1] == {("t", 0): (7, "")}
