"""Pinned Java artifacts from Maven, fetched once into an ignored cache folder.

``kafka_classpath(version)`` gives the jars that run an Apache Kafka broker of ``version``
and its command-line tools (``kafka_2.13`` and ``kafka-tools`` with their runtime
dependencies, plus the logging binding that version logs through); ``spark_kafka_jars()``
gives Spark's own JVM Kafka connector for the PySpark under test (a referee for tests and
benchmarks; the product never needs a jar). Each set is resolved by Maven's dependency
plugin (pinned) into ``<cache>/<name>/`` (through Maven's own download cache,
``~/.m2/repository``, so a fresh clone on the same machine copies instead of downloading);
a set whose folder holds its ``.complete`` stamp is never fetched again.

The cache is ``.cache/`` at the checkout's root (git ignores it), or
``$PYKAFKA_TESTBED_CACHE``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = [
    "KAFKA_VERSIONS",
    "NEWEST_KAFKA",
    "OLDEST_KAFKA",
    "MavenFetchError",
    "cache_dir",
    "kafka_classpath",
    "kafka_jar_dir",
    "fetch_artifacts",
    "SPARK_KAFKA_CONNECTOR",
    "spark_kafka_jars",
]

#: The Apache Kafka versions the tests run on: the newest 3.9.x and each 4.x minor's newest
#: patch release that Maven served on 2026-11-25.
KAFKA_VERSIONS = ("3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0")
NEWEST_KAFKA = KAFKA_VERSIONS[-1]
OLDEST_KAFKA = KAFKA_VERSIONS[0]

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# Kafka 4.x logs through slf4j-api 1.7 and log4j2; 3.9 through reload4j (log4j 1).
_LOG4J2 = [
    ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3"),
    ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
]
_RELOAD4J = [("org.slf4j", "slf4j-reload4j", "1.7.36"), ("ch.qos.reload4j", "reload4j", "1.2.25")]

#: Spark's JVM Kafka connector per Spark version: the versions of the jars it needs beyond
#: the ones PySpark ships (read off the connector's pom: ``kafka-clients`` and
#: ``commons-pool2`` are its compile dependencies; PySpark's jars hold the rest, including
#: lz4-java, zstd-jni and snappy-java, which the connector's pom excludes or takes from
#: Spark). Maven serves the connector up to 4.2.0 (not 4.2.1+, not 4.3.0).
SPARK_KAFKA_CONNECTOR = {
    "4.2.0": {"kafka-clients": "3.9.2", "commons-pool2": "2.13.1"},
}

_lock = threading.Lock()


class MavenFetchError(RuntimeError):
    """Maven could not resolve a pinned artifact set (its output is in the message)."""


def cache_dir() -> Path:
    env = os.environ.get("PYKAFKA_TESTBED_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / ".cache"


def uses_log4j2(version: str) -> bool:
    return int(version.split(".")[0]) >= 4


def kafka_jar_dir(version: str) -> Path:
    """The folder of ``version``'s broker and tool jars, fetched first if need be."""
    artifacts = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
    ]
    artifacts += _LOG4J2 if uses_log4j2(version) else _RELOAD4J
    return fetch_artifacts(f"apache-kafka-{version}", artifacts)


def kafka_classpath(version: str) -> str:
    folder = kafka_jar_dir(version)
    return os.pathsep.join(str(p) for p in sorted(folder.glob("*.jar")))


def spark_kafka_jars(spark_version: str) -> list[Path]:
    """The jars to put in ``spark.jars`` so PySpark ``spark_version`` reads and writes with
    ``format("kafka")`` (and decodes with ``from_avro``): the connector, its token provider,
    ``kafka-clients``, ``commons-pool2`` and ``spark-avro``, fetched without their
    transitive dependencies (PySpark ships those). A referee for tests and benchmarks only."""
    if spark_version not in SPARK_KAFKA_CONNECTOR:
        raise MavenFetchError(
            f"no pinned Kafka connector for Spark {spark_version} "
            f"(pinned: {', '.join(SPARK_KAFKA_CONNECTOR)})"
        )
    pins = SPARK_KAFKA_CONNECTOR[spark_version]
    artifacts = [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", spark_version),
        ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", spark_version),
        ("org.apache.spark", "spark-avro_2.13", spark_version),
        ("org.apache.kafka", "kafka-clients", pins["kafka-clients"]),
        ("org.apache.commons", "commons-pool2", pins["commons-pool2"]),
    ]
    folder = fetch_artifacts(f"spark-kafka-{spark_version}", artifacts, transitive=False)
    return sorted(folder.glob("*.jar"))


def fetch_artifacts(
    name: str,
    artifacts: list[tuple[str, str, str]],
    *,
    exclude_group_ids: tuple[str, ...] = (),
    transitive: bool = True,
) -> Path:
    """``artifacts`` (group, artifact, version) and their runtime dependencies in
    ``<cache>/<name>/``; fetched by Maven unless that folder is already complete."""
    target = cache_dir() / name
    stamp = target / ".complete"
    if stamp.exists():
        return target
    cache_dir().mkdir(parents=True, exist_ok=True)
    # one fetch at a time, across threads and processes (two pytest runs share the cache)
    with _lock, open(cache_dir() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MavenFetchError(f"fetching {name} needs Maven ('mvn' is not on PATH)")
        work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache_dir()))
        try:
            deps = "\n".join(
                f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
                f"<version>{v}</version></dependency>"
                for g, a, v in artifacts
            )
            (work / "pom.xml").write_text(
                '<project xmlns="http://maven.apache.org/POM/4.0.0">'
                "<modelVersion>4.0.0</modelVersion><groupId>pykafka.testbed</groupId>"
                f"<artifactId>fetch</artifactId><version>1</version><packaging>pom</packaging>"
                f"<dependencies>{deps}</dependencies></project>"
            )
            lib = work / "lib"
            cmd = [
                mvn,
                "-B",
                "-q",
                "-f",
                str(work / "pom.xml"),
                f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={lib}",
            ]
            if exclude_group_ids:
                cmd.append(f"-DexcludeGroupIds={','.join(exclude_group_ids)}")
            if not transitive:
                cmd.append("-DexcludeTransitive=true")
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if run.returncode != 0 or not lib.is_dir():
                raise MavenFetchError(
                    f"Maven could not fetch {name} ({artifacts}):\n"
                    f"{run.stdout[-4000:]}{run.stderr[-4000:]}"
                )
            (lib / ".complete").write_text("\n".join(":".join(a) for a in artifacts) + "\n")
            if target.exists():
                shutil.rmtree(target)
            lib.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return target
