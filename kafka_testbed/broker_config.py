"""What a testbed Kafka node is told: its ``server.properties`` and its log4j files.

:func:`server_properties` turns a :class:`~kafka_testbed.apache_kafka.KafkaCluster`'s
arguments into one node's settings: a table of the settings every node gets (small
thread pools, fast failure detection, no retention: tests write records stamped years
ago), then one step per feature (SASL users, the JWKS validator, TLS keystores as inline
PEM, the authorizer, racks), then the caller's ``broker_config`` on top. The log4j (1 or 2,
after the Kafka version) files send a node's log to its own file, a tool's to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .maven_jars import uses_log4j2

if TYPE_CHECKING:
    from .apache_kafka import KafkaCluster
    from .broker_node import Node

#: The users every ``sasl=True`` cluster has: PLAIN users from the listener's JAAS file,
#: SCRAM users (both mechanisms) created at format time.
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
#: The super user of an ``authorizer=True`` cluster: every PLAINTEXT connection's principal.
SUPER_USER = "User:ANONYMOUS"

LISTENER_PROTOCOLS = {
    "PLAINTEXT": "PLAINTEXT",
    "SASL": "SASL_PLAINTEXT",
    "OAUTH": "SASL_PLAINTEXT",
    "SSL": "SSL",
    "SASL_SSL": "SASL_SSL",
    "PROXIED": "PLAINTEXT",
    "GSSAPI": "SASL_PLAINTEXT",
    "CONTROLLER": "PLAINTEXT",
}
_PASSWORD_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

#: What every node gets whatever the cluster's size and features.
_FIXED_PROPS = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    # Tests write records stamped years ago (as Spark's own Kafka tests do): with
    # Kafka's 7-day default the next retention check deleted them under the test.
    "log.retention.ms": "-1",
    "log.retention.check.interval.ms": "30000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    "log.cleaner.backoff.ms": "1000",
    "controlled.shutdown.enable": "true",
    # a killed node's partitions move after 6 s instead of 18 (tests kill nodes)
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
}


def server_properties(cluster: KafkaCluster, node: Node) -> dict[str, str]:
    """``node``'s ``server.properties`` as a dict, in the order they are written."""
    props = _topology_props(cluster, node)
    props.update(_FIXED_PROPS)
    for step in (_sasl_props, _ssl_props, _authorizer_props):
        props.update(step(cluster))
    if cluster.racks is not None:  # node ids count from 1
        props["broker.rack"] = cluster.racks[node.node_id - 1]
        props["replica.selector.class"] = _RACK_AWARE_SELECTOR
    props.update(cluster.broker_config)
    return props


def _topology_props(cluster: KafkaCluster, node: Node) -> dict[str, str]:
    """The node's id, listeners, quorum, log folder and the replication its size allows."""
    n = len(cluster.nodes)
    names = cluster.listeners + ["CONTROLLER"]
    voters = ",".join(
        f"{m.node_id}@127.0.0.1:{m.ports['CONTROLLER']}" for m in cluster.nodes.values()
    )
    protocols = ",".join(f"{name}:{LISTENER_PROTOCOLS.get(name, 'SSL')}" for name in names)
    listeners = ",".join(f"{name}://127.0.0.1:{node.ports[name]}" for name in names)
    advertised = ",".join(
        f"{name}://{'localhost' if name == 'GSSAPI' else '127.0.0.1'}:"
        f"{cluster.proxied[node.node_id] if name == 'PROXIED' else node.ports[name]}"
        for name in cluster.listeners
    )
    rf, isr = str(min(3, n)), "2" if n >= 3 else "1"
    return {
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "log.dirs": str(node.directory / "data"),
        "num.partitions": str(cluster.num_partitions),
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
    }


def _sasl_props(cluster: KafkaCluster) -> dict[str, str]:
    """The ``SASL``, ``OAUTH`` and ``GSSAPI`` listeners, and re-authentication."""
    props: dict[str, str] = {}
    if cluster.sasl:
        props.update(_password_props("sasl"))
        props["listener.name.sasl.sasl.enabled.mechanisms"] = _PASSWORD_MECHANISMS + ",OAUTHBEARER"
        props["listener.name.sasl.oauthbearer.sasl.jaas.config"] = (
            f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="broker";'
        )
    if cluster.oauth_jwks:
        props.update(_jwks_props(cluster, "oauth"))
        props["listener.name.oauth.sasl.enabled.mechanisms"] = "OAUTHBEARER"
    if cluster.kerberos is not None:
        props.update(cluster.kerberos.broker_props("gssapi"))
    if cluster.reauth_ms is not None:
        for name in ("sasl", "oauth", "sasl_ssl", "gssapi"):
            props[f"listener.name.{name}.connections.max.reauth.ms"] = str(cluster.reauth_ms)
    return props


def _ssl_props(cluster: KafkaCluster) -> dict[str, str]:
    """The ``SSL`` and ``SASL_SSL`` listeners and the further TLS ones."""
    props: dict[str, str] = {}
    if cluster.ssl:
        props.update(_keystore_props("ssl", *cluster.ssl))
        if cluster.ssl_client_ca:
            props.update(
                {
                    "listener.name.ssl.ssl.client.auth": "required",
                    "listener.name.ssl.ssl.truststore.type": "PEM",
                    "listener.name.ssl.ssl.truststore.certificates": Path(cluster.ssl_client_ca)
                    .read_text()
                    .strip()
                    .replace("\n", "\\n"),
                }
            )
    if cluster.sasl_ssl:
        assert cluster.ssl is not None  # checked when the cluster was made
        props.update(_keystore_props("sasl_ssl", *cluster.ssl))
        props.update(_password_props("sasl_ssl"))
        mechanisms = _PASSWORD_MECHANISMS
        if cluster.oauth_jwks:
            props.update(_jwks_props(cluster, "sasl_ssl"))
            mechanisms += ",OAUTHBEARER"
        props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = mechanisms
    for name, (cert, key) in cluster.ssl_listeners.items():
        props.update(_keystore_props(name.lower(), cert, key))
    return props


def _authorizer_props(cluster: KafkaCluster) -> dict[str, str]:
    if not cluster.authorizer:
        return {}
    return {
        "authorizer.class.name": _AUTHORIZER,
        "super.users": SUPER_USER,
        "allow.everyone.if.no.acl.found": "false",
    }


def _password_props(listener: str) -> dict[str, str]:
    """PLAIN (the users of :data:`SASL_USERS` in the JAAS line) and SCRAM (the users
    made at format time) on ``listener``."""
    users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
    prefix = f"listener.name.{listener}"
    return {
        f"{prefix}.plain.sasl.jaas.config": f"{_PLAIN_MODULE} required {users};",
        f"{prefix}.scram-sha-256.sasl.jaas.config": f"{_SCRAM_MODULE} required;",
        f"{prefix}.scram-sha-512.sasl.jaas.config": f"{_SCRAM_MODULE} required;",
    }


def _jwks_props(cluster: KafkaCluster, listener: str) -> dict[str, str]:
    """OAUTHBEARER on ``listener`` checked by Kafka's JWKS validator against the
    ``oauth_jwks`` JWKS (its URL is allowed when the node is launched)."""
    prefix = f"listener.name.{listener}.oauthbearer.sasl.oauthbearer."
    assert cluster.jwks_url is not None  # called only with oauth_jwks
    props = {
        f"listener.name.{listener}.oauthbearer.sasl.jaas.config": f"{_OAUTH_MODULE} required;",
        (
            f"listener.name.{listener}.oauthbearer.sasl.server.callback.handler.class"
        ): _JWKS_VALIDATOR,
        f"{prefix}jwks.endpoint.url": cluster.jwks_url,
        # Kafka 4.4 refuses to start a JWKS validator that checks neither the
        # audience nor the issuer; tests' tokens carry no "aud" (older versions ignore
        # the allow.unverified settings with an "unknown config" line).
        f"{prefix}allow.unverified.audience": "true",
    }
    if cluster.oauth_issuer:
        props[f"{prefix}expected.issuer"] = cluster.oauth_issuer
    else:
        props[f"{prefix}allow.unverified.issuer"] = "true"
    return props


def _keystore_props(listener: str, cert: str, key: str) -> dict[str, str]:
    """``listener``'s certificate chain and key, inline PEM (the key as PKCS#8)."""
    prefix = f"listener.name.{listener}.ssl.keystore"
    return {
        f"{prefix}.type": "PEM",
        f"{prefix}.certificate.chain": Path(cert).read_text().strip().replace("\n", "\\n"),
        f"{prefix}.key": _pkcs8(Path(key).read_bytes()).strip().replace("\n", "\\n"),
    }


def _pkcs8(key_pem: bytes) -> str:
    """``key_pem`` as an unencrypted PKCS#8 PEM, the only private-key form Kafka's PEM
    keystore reads."""
    if b"BEGIN PRIVATE KEY" in key_pem:
        return key_pem.decode()
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def tool_log_config(base: Path, version: str) -> Path:
    """The log4j file of a Kafka tool run (errors only, to stderr), made once in ``base``."""
    path = base / ("tools-log4j2.properties" if uses_log4j2(version) else "tools-log4j.properties")
    if not path.exists():
        if uses_log4j2(version):
            path.write_text(
                "status = error\nrootLogger.level = error\n"
                "rootLogger.appenderRef.stderr.ref = STDERR\n"
                "appender.stderr.type = Console\nappender.stderr.name = STDERR\n"
                "appender.stderr.target = SYSTEM_ERR\n"
                "appender.stderr.layout.type = PatternLayout\n"
                "appender.stderr.layout.pattern = %p %m (%c)%n\n"
            )
        else:
            path.write_text(
                "log4j.rootLogger=ERROR, stderr\n"
                "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.Target=System.err\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=%p %m (%c)%n\n"
            )
    return path


def write_log_config(node: Node, version: str, request_log: bool) -> None:
    """``node``'s log4j file: its log to ``server.log``; with ``request_log`` every request
    it answers to ``requests.log``."""
    if uses_log4j2(version):
        text = (
            "status = error\nrootLogger.level = info\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            "appender.file.type = File\nappender.file.name = FILE\n"
            f"appender.file.fileName = {node.log_file}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = info\n"
            "logger.apache.name = org.apache.kafka\nlogger.apache.level = info\n"
        )
        if request_log:
            text += (
                "appender.requests.type = File\nappender.requests.name = REQUESTS\n"
                f"appender.requests.fileName = {node.request_log_file}\n"
                "appender.requests.layout.type = PatternLayout\n"
                "appender.requests.layout.pattern = %m%n\n"
                "logger.requests.name = kafka.request.logger\n"
                "logger.requests.level = debug\nlogger.requests.additivity = false\n"
                "logger.requests.appenderRef.requests.ref = REQUESTS\n"
            )
        (node.directory / "log4j2.properties").write_text(text)
    else:
        text = (
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={node.log_file}\n"
            "log4j.appender.file.Append=true\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        if request_log:
            text += (
                "log4j.appender.requests=org.apache.log4j.FileAppender\n"
                f"log4j.appender.requests.File={node.request_log_file}\n"
                "log4j.appender.requests.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.requests.layout.ConversionPattern=%m%n\n"
                "log4j.logger.kafka.request.logger=DEBUG, requests\n"
                "log4j.additivity.kafka.request.logger=false\n"
            )
        (node.directory / "log4j.properties").write_text(text)


def log_config_args(version: str, path: Path) -> list[str]:
    """The JVM flag that points log4j (1 or 2, after ``version``) at ``path``."""
    if uses_log4j2(version):
        return [f"-Dlog4j2.configurationFile={path}"]
    return [f"-Dlog4j.configuration=file:{path}"]
