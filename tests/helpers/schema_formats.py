"""The Avro, Protobuf and JSON Schema fixtures the Schema Registry tests share."""

from __future__ import annotations

import sys


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  Status status = 5;
  google.protobuf.Timestamp at = 6;
  optional double discount = 7;
  message Line { string sku = 1; uint32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""


def _pb2(tmp_path, text=PROTO, name="shop"):
    """The Python module protoc generates for ``text`` (saved as ``<name>.proto``)."""
    import importlib
    import importlib.resources

    from grpc_tools import protoc

    (tmp_path / f"{name}.proto").write_text(text)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    assert (
        protoc.main(
            ["protoc", f"-I{tmp_path}", f"-I{include}", f"--python_out={tmp_path}", f"{name}.proto"]
        )
        == 0
    )
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(f"{name}_pb2")
    finally:
        sys.path.remove(str(tmp_path))


EVENTS = """
syntax = "proto3";
package events;

message Created { string id = 1; int64 cents = 2; }
message Refund {
  string order = 1;
  int64 cents = 2;
  Reason reason = 3;
  message Reason { string code = 1; int32 level = 2; }
}
"""


# A JSON Schema loose enough that JSONSerializer (which validates) lets through values
# that do not fit the reader's DDL: the DDL decides, as from_json's schema does.
LOOSE = {
    "type": "object",
    "properties": {
        "id": {"type": ["integer", "string", "number"]},
        "name": {"type": ["string", "object"]},
        "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        "price": {"type": ["number", "string"]},
        "at": {"type": ["string", "integer"]},
        "day": {"type": "string"},
        "attrs": {"type": "object"},
        "where": {"type": ["object", "string"]},
    },
}


DDL = (
    "id INT, name STRING, tags ARRAY<STRING>, price DECIMAL(6, 2), at TIMESTAMP, "
    "day DATE, attrs MAP<STRING, BIGINT>, `where` STRUCT<lat: DOUBLE, lon: DOUBLE>, "
    "missing STRING NOT NULL COMMENT 'never written'"
)
