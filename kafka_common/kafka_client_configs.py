"""The configuration names of Kafka's own Java clients, without the ``kafka.`` prefix.

Spark's JVM connector hands every ``kafka.*`` option to Kafka's consumer, producer or admin
client, so jobs written for it carry options this connector has no use for
(``kafka.session.timeout.ms``, ``kafka.ssl.truststore.location``, ...): those are warned
about and ignored. A ``kafka.*`` name that is neither one of these nor one the connector
knows is a mistake, and when it is close to a known name it is refused with a "did you
mean" (``option_map.check_names``): ``kafka.isolation.levle`` must not be read as
read_uncommitted in silence.

The union of the names ``ConsumerConfig``, ``ProducerConfig`` and ``AdminClientConfig``
document in Kafka 3.9.2 and 4.4.0 (their ``main`` prints them;
tests/test_first_hour.py checks the list against the jars).
"""

from __future__ import annotations

__all__ = ["KAFKA_CLIENT_CONFIGS"]

KAFKA_CLIENT_CONFIGS = frozenset({
    "acks", "allow.auto.create.topics", "auto.commit.interval.ms",
    "auto.include.jmx.reporter", "auto.offset.reset", "batch.size",
    "bootstrap.resolve.timeout.ms", "bootstrap.servers", "buffer.memory", "check.crcs",
    "client.dns.lookup", "client.id", "client.rack", "compression.gzip.level",
    "compression.lz4.level", "compression.type", "compression.zstd.level",
    "config.providers", "connections.max.idle.ms", "default.api.timeout.ms",
    "delivery.timeout.ms", "enable.auto.commit", "enable.idempotence",
    "enable.metrics.push", "exclude.internal.topics", "fetch.max.bytes",
    "fetch.max.wait.ms", "fetch.min.bytes", "group.id", "group.instance.id",
    "group.protocol", "group.remote.assignor", "heartbeat.interval.ms",
    "interceptor.classes", "isolation.level", "key.deserializer", "key.serializer",
    "linger.ms", "max.block.ms", "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes", "max.poll.interval.ms", "max.poll.records",
    "max.request.size", "metadata.cluster.check.enable", "metadata.max.age.ms",
    "metadata.max.idle.ms", "metadata.recovery.rebootstrap.trigger.ms",
    "metadata.recovery.strategy", "metric.reporters", "metrics.num.samples",
    "metrics.recording.level", "metrics.sample.window.ms", "partition.assignment.strategy",
    "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms",
    "partitioner.class", "partitioner.ignore.keys", "partitioner.rack.aware",
    "receive.buffer.bytes", "reconnect.backoff.max.ms", "reconnect.backoff.ms",
    "request.timeout.ms", "retries", "retry.backoff.max.ms", "retry.backoff.ms",
    "sasl.client.callback.handler.class", "sasl.jaas.config", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms", "sasl.mechanism",
    "sasl.oauthbearer.allow.unverified.audience",
    "sasl.oauthbearer.allow.unverified.issuer", "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud", "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file", "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.template.file",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.header.urlencode",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.jwt.validator.class", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url", "security.protocol", "security.providers",
    "send.buffer.bytes", "session.timeout.ms", "share.acknowledgement.mode",
    "share.acquire.mode", "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class",
    "ssl.key.password", "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.keystore.type", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type", "transaction.timeout.ms", "transaction.two.phase.commit.enable",
    "transactional.id", "value.deserializer", "value.serializer",
})
