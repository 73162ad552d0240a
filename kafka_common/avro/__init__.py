"""Avro values without a JVM: schemas, Spark's type mapping, schema resolution, and a
columnar decoder and encoder between Avro's binary encoding and Arrow arrays.

- ``schema``: ``parse_schema`` (Avro JSON, named types, registry references) -> ``AvroSchema``;
- ``spark_types``: ``arrow_type`` (what Spark's ``from_avro`` gives, as Arrow), ``spark_ddl``,
  ``spark_type``, and ``avro_schema_of`` (the schema Spark's ``to_avro`` writes with);
- ``resolution``: ``resolve(writer, reader)`` by the Avro specification's rules;
- ``decoder``: ``Decoder(writer, reader, options).decode(values, starts)`` -> (array, errors),
  record-parallel with NumPy (``kernels`` reads the primitive encodings at many positions,
  ``skipping`` reads past values and walks array and map blocks, ``arrays`` builds the
  Arrow arrays); ``compiled`` decodes records of plain fields in one call of the compiled
  record decoder instead, when it is in use, into the same arrays;
- ``encoder``: ``Encoder(schema).encode(array)`` -> Avro binary datums.

Spark-free, like ``protocol``: pyarrow and numpy only.
"""

from .decoder import Decoder
from .encoder import Encoder
from .resolution import AvroResolutionError, Resolution, resolve
from .schema import AvroSchema, AvroSchemaError, parse_schema
from .spark_types import arrow_type, spark_ddl, spark_type

__all__ = [
    "AvroResolutionError",
    "AvroSchema",
    "AvroSchemaError",
    "Decoder",
    "Encoder",
    "Resolution",
    "arrow_type",
    "parse_schema",
    "resolve",
    "spark_ddl",
    "spark_type",
]
