"""How far a pykafka stream is behind the latest offsets, from its progress reports.

Spark's JVM Kafka source publishes ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` (strings, over every partition of the latest offsets it
saw: latest minus the batch's end) in each source progress's ``metrics``. A Python data
source cannot publish source metrics in Spark 4, but ours reports the latest offsets it
saw (``reportLatestOffset``), so the same figures follow from ``endOffset`` and
``latestOffset``::

    from pyspark_pykafka import KafkaLagListener, offsets_behind_latest

    offsets_behind_latest(query.lastProgress)  # one entry per pykafka source
    spark.streams.addListener(KafkaLagListener())  # logs them on "pykafka.lag"

``offsets_behind_latest`` takes a ``StreamingQueryProgress``, its JSON text or that JSON's
dict; sources whose offsets are not ``{topic: {partition: offset}}`` are left out.
``with_lag_metrics`` puts the figures in each pykafka source's ``metrics``, where
dashboards built for Spark's connector look. As in Spark, a partition named by only one
of the two offsets is not counted.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from collections.abc import Callable, Mapping

from kafka_common.java_double import java_double

log = logging.getLogger("pykafka.lag")

METRICS = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")


def _as_dict(progress: Any) -> dict:
    """A progress report as the dict of its JSON (StreamingQueryProgress, JSON text, dict)."""
    if isinstance(progress, Mapping):
        return dict(progress)
    if isinstance(progress, (str, bytes)):
        return json.loads(progress)
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return json.loads(text)
    raise TypeError(
        "a StreamingQueryProgress, its json text or a dict was expected, got "
        f"{type(progress).__name__}"
    )


def _partition_offsets(value: Any) -> dict[tuple[str, int], int] | None:
    """``{topic: {"partition": offset}}`` (as JSON text or parsed) as {(topic, partition):
    offset}; None for anything else (another source's offsets, a missing one)."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping) or not value:
        return None
    out = {}
    for topic, parts in value.items():
        if not isinstance(parts, Mapping):
            return None
        for partition, offset in parts.items():
            try:
                out[(str(topic), int(partition))] = int(offset)
            except (TypeError, ValueError):
                return None
    return out


def source_lag(source: Mapping) -> dict[str, str]:
    """The three metrics of one source progress (a dict with ``endOffset`` and
    ``latestOffset``), as Spark's JVM source gives them: strings, the mean as a float's
    text. Empty when either offset is missing or not a Kafka offset."""
    end = _partition_offsets(source.get("endOffset"))
    latest = _partition_offsets(source.get("latestOffset"))
    if end is None or latest is None:
        return {}
    behind = [offset - end[tp] for tp, offset in latest.items() if tp in end]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": java_double(sum(behind) / len(behind)),
    }


def offsets_behind_latest(progress: Any) -> list[dict[str, str]]:
    """One entry per Kafka source of ``progress`` that saw the latest offsets: its
    ``description`` and the three metrics (see the module docstring)."""
    out = []
    for source in _as_dict(progress).get("sources") or []:
        lag = source_lag(source)
        if lag:
            out.append({"description": source.get("description", ""), **lag})
    return out


def with_lag_metrics(progress: Any) -> dict:
    """``progress`` as a dict in which each Kafka source's ``metrics`` also holds the three
    figures (what Spark's JVM source would have put there)."""
    report = _as_dict(progress)
    sources = []
    for source in report.get("sources") or []:
        source = dict(source)
        lag = source_lag(source)
        if lag:
            source["metrics"] = {**(source.get("metrics") or {}), **lag}
        sources.append(source)
    report["sources"] = sources
    return report


def query_label(progress: Any) -> str:
    """``query 'name' (id)``, or ``query id`` for a query started without a name (Spark
    reports its name as None)."""
    name = getattr(progress, "name", None)
    return f"query {name!r} ({progress.id})" if name else f"query {progress.id}"


def _with_topics(progress: Any, lags: list[dict[str, str]]) -> list[dict[str, str]]:
    """``lags`` each with ``topics``: the topics of its source's offsets (what the user
    subscribed to), where the description is Spark's internal class name."""
    sources = [s for s in _as_dict(progress).get("sources") or [] if source_lag(s)]
    out = []
    for lag, source in zip(lags, sources):
        offsets = _partition_offsets(source.get("endOffset")) or {}
        out.append({**lag, "topics": ", ".join(sorted({t for t, _ in offsets}))})
    return out


def _listener_base():
    from pyspark.sql.streaming import StreamingQueryListener

    return StreamingQueryListener


class KafkaLagListener(_listener_base()):  # type: ignore[misc]
    """A ``StreamingQueryListener`` that computes the three figures of every pykafka source
    after each micro-batch and logs them (logger ``pykafka.lag``, INFO) or hands them to
    ``export(progress, lags)``, where ``lags`` is what ``offsets_behind_latest`` answers and
    ``progress`` the event's ``StreamingQueryProgress`` (its ``id``, ``name``, ``batchId``
    say which query and batch). Register it with ``spark.streams.addListener``. An error in
    ``export`` is logged, never raised into Spark's listener bus."""

    def __init__(self, export: Callable[[Any, list[dict[str, str]]], None] | None = None):
        self.export = export

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        try:
            lags = offsets_behind_latest(progress)
            if not lags:
                return
            if self.export is not None:
                self.export(progress, lags)
                return
            lags = _with_topics(progress, lags)
            for lag in lags:
                log.info(
                    "%s batch %s: topics %s: offsets behind latest min %s, max %s, avg %s",
                    query_label(progress),
                    progress.batchId,
                    lag["topics"],
                    *(lag[m] for m in METRICS),
                )
        except Exception as e:  # a listener must not break the listener bus
            log.warning("could not report the offsets behind latest: %s", e)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass
