"""The tests' Schema Registry: ``kafka_testbed.schema_registry`` (it moved there so that
``python -m kafka_testbed`` can offer it to users as well)."""

from kafka_testbed.schema_registry import RegistryServer

__all__ = ["RegistryServer"]
