"""Helpers of the Schema Registry tests: the schemas' versions and producing framed records."""

from __future__ import annotations

import json
import confluent_kafka
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


V1 = {
    "type": "record",
    "name": "User",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "int"},
    ],
}


# Evolved: score promoted int -> long, field removed, field added with a default,
# nullable field added.
V2 = {
    "type": "record",
    "name": "User",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "score", "type": "long"},
        {
            "name": "tier",
            "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO"]},
            "default": "FREE",
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}


def produce(bootstrap, topic, registry_url, schema, rows, *, partition=0, header_ids=False):
    """``rows`` written by confluent-kafka's AvroSerializer (None: a tombstone); returns
    the serialized values."""
    from confluent_kafka.schema_registry import header_schema_id_serializer

    sr = SchemaRegistryClient({"url": registry_url})
    conf = {"schema.id.serializer": header_schema_id_serializer} if header_ids else {}
    ser = AvroSerializer(sr, json.dumps(schema), conf=conf)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    out = []
    for row in rows:
        headers = []
        ctx = SerializationContext(topic, MessageField.VALUE, headers)
        value = ser(row, ctx) if row is not None else None
        p.produce(topic, value=value, partition=partition, headers=headers or None)
        out.append((value, headers))
    assert p.flush(10) == 0
    return out
