"""What the reader (``kafka_source``) and the writer (``kafka_sink``) share, and neither owns.

- ``option_map``: reading the options Spark hands a data source (``OptionMap``, its typed
  getters) and warning once about an option (``warn_once``);
- ``connection_options``: the options that say how to reach the brokers (bootstrap servers,
  client id, TLS, SASL), documented once in ``SECURITY_OPTIONS`` and turned into a
  ``protocol.config.ClientConfig`` the same way for both sides.
- ``avro``: Avro values without a JVM: schemas, Spark's ``from_avro`` type mapping as Arrow,
  schema resolution, a columnar decoder and encoder (Schema Registry data, issue 24).

Spark-free, like ``protocol``: both packages build on it, it builds on ``protocol`` only.
"""
