"""A writeStream to pykafka with ``delegationToken.enabled`` run past its first token's
maximum lifetime, for ``tests/test_delegation_tokens.py``: in the tests' session, or as a
child driver whose Python workers are not reused (``spark.python.worker.reuse=false``:
every planning and every commit in a fresh process, so no token kept in a process helps).

    python -m tests.helpers.token_stream_child JSON

JSON: {"sasl": bootstrap, "plain": bootstrap, "topic": t, "checkpoint": dir, "user": u,
"password": p, "reauth_ms": n}. Prints one JSON line: what ``write_past_the_first_token``
returns.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from protocol.client.cluster import KafkaClient
from protocol.client.delegation_tokens import DelegationToken, describe_tokens
from protocol.config import ClientConfig

from .secrets import assert_no_secret
from .waiting import wait_until


def _driver(spec: dict) -> KafkaClient:
    return KafkaClient(
        ClientConfig(
            bootstrap_servers=[spec["sasl"]],
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=spec["user"],
            sasl_password=spec["password"],
            request_timeout_ms=10_000,
        )
    )


def stream_tokens(driver, since_ms: float, seen: dict[str, DelegationToken]) -> None:
    """Add to ``seen`` the tokens issued since ``since_ms``, each with the latest expiry
    seen (a renewal moves it)."""
    for token in describe_tokens(driver):
        known = seen.get(token.token_id)
        if token.issue_ms >= since_ms and (known is None or token.expiry_ms > known.expiry_ms):
            seen[token.token_id] = token


def write_past_the_first_token(spark, spec: dict) -> dict:
    """Rate rows to ``topic`` through pykafka with a delegation token, until three
    micro-batches with rows ran after the first token's maximum lifetime and REAUTH_MS:
    the tokens issued meanwhile (id -> issue, expiry, max), the rows committed, the
    micro-batches, the time taken, and the stream's error or a leaked HMAC, if any."""
    since_ms = time.time() * 1000 - 1000
    writer = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", "20")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("pykafka")
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(processingTime="500 milliseconds")
        .option("kafka.bootstrap.servers", spec["sasl"])
        .option("kafka.security.protocol", "SASL_PLAINTEXT")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option("kafka.sasl.username", spec["user"])
        .option("kafka.sasl.password", spec["password"])
        .option("delegationToken.enabled", "true")
        .option("topic", spec["topic"])
    )
    query = writer.start()
    seen: dict[str, DelegationToken] = {}
    committed = 0
    result: dict = {"error": None}
    try:

        def alive() -> None:
            if query.exception() is not None:
                raise AssertionError(f"the stream failed: {query.exception()}")
            with _driver(spec) as driver:
                stream_tokens(driver, since_ms, seen)

        def past_the_first_tokens_end() -> bool:
            alive()
            first = min(seen.values(), key=lambda t: t.issue_ms, default=None)
            ends = first.max_ms + spec["reauth_ms"] + 1500 if first else None
            return ends is not None and time.time() * 1000 > ends

        wait_until(past_the_first_tokens_end, 90, "the first token's end", 0.5)
        batch_then = query.lastProgress["batchId"]

        def written_later() -> bool:
            alive()
            progress = query.lastProgress
            return progress["batchId"] >= batch_then + 3 and progress["numInputRows"] > 0

        wait_until(written_later, 60, "micro-batches written after the first token's end", 0.5)
        plan = io.StringIO()
        with contextlib.redirect_stdout(plan):
            query.explain(extended=True)
        shown = plan.getvalue() + str(query.recentProgress)
        committed = sum(p["numInputRows"] for p in query.recentProgress)
        result["batches"] = query.lastProgress["batchId"]
        assert_no_secret(shown, secrets=[t.hmac.reveal() for t in seen.values()])
    except AssertionError as e:
        result["error"] = str(e)
    finally:
        query.stop()
    result.update(
        tokens={t.token_id: [t.issue_ms, t.expiry_ms, t.max_ms] for t in seen.values()},
        committed=committed,
        elapsed_ms=time.time() * 1000 - since_ms,
    )
    return result


def main(spec: dict) -> None:
    from .child_session import child_spark

    spark = child_spark(
        "local[2]",
        "pykafka-token-stream-child",
        {"spark.python.worker.reuse": "false", "spark.sql.shuffle.partitions": "2"},
    )
    try:
        print(json.dumps(write_past_the_first_token(spark, spec)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
