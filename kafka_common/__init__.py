"""What the reader (``kafka_source``) and the writer (``kafka_sink``) share, and neither owns.

- ``option_map``: reading the options Spark hands a data source (``OptionMap``, its typed
  getters) and warning once about an option (``warn_once``);
- ``connection_options``: the options that say how to reach the brokers (bootstrap servers,
  client id, TLS, SASL), documented once in ``SECURITY_OPTIONS`` and turned into a
  ``protocol.config.ClientConfig`` the same way for both sides;
- ``oauth``: where OAUTHBEARER tokens come from (OIDC client credentials, a token file, a
  Python callable, Kafka's unsecured tokens, Google's shape), cached per process and
  refreshed by Kafka's ``sasl.login.refresh.*`` rules;
- ``aws_msk_iam``: AWS credentials (environment, profile, STS AssumeRole, botocore) for
  MSK IAM, both as the ``AWS_MSK_IAM`` mechanism and as OAUTHBEARER tokens;
- ``avro``: Avro values without a JVM: schemas, Spark's ``from_avro`` type mapping as Arrow,
  schema resolution, a columnar decoder and encoder.

Spark-free, like ``protocol``: both packages build on it, it builds on ``protocol`` only.
"""
