"""Protobuf values as Arrow columns, as Spark's ``from_protobuf`` types them.

- ``compile``: a registry's ``.proto`` text (and its references) into descriptors, with the
  ``protoc`` that the ``grpcio-tools`` wheel ships (the ``protobuf`` extra);
- ``spark_types``: ``arrow_type(descriptor, options)``, Spark's mapping of a message;
- ``decoder``: ``Decoder(descriptor, options).decode(values, starts)`` -> (array, errors).
"""

from .compile import message_descriptor
from .decoder import Decoder
from .spark_types import arrow_type

__all__ = ["message_descriptor", "Decoder", "arrow_type"]
