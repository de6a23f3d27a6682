"""Operational metrics of a PriorityConsumer and a ShardedExecutor, as a dict or for Prometheus.

:class:`Metrics` gathers, each time it is read:

* per level, from the ``level_figures`` snapshot a PriorityConsumer (of either client family)
  publishes from its polling thread: records returned, reserved and last quota, burst events,
  records prefetched, stalled rebalances and partitions paused;
* per level and partition, from a :class:`LagReader` (its own admin client, so it never touches
  the consumer from another thread): the end offset, the group's committed offset and the lag;
* from :meth:`ShardedExecutor.stats`: handled, retries, dead-lettered, ... and in flight, queued
  and running now;
* per level, from a :class:`LatencyRecorder` (fed by :meth:`Metrics.timed`, a handler wrapper):
  handler duration and end-to-end latency (record timestamp to handler end).

:meth:`Metrics.snapshot` returns all of it as a plain dict; :func:`serve_prometheus` exposes it
over HTTP in the Prometheus text format (extra ``[metrics]``: ``prometheus_client``, imported
only there). Every name is listed in :data:`PROMETHEUS_METRICS`.

The executor does not publish commit latency (only the ``commits`` and ``commit_failures``
counts), so no commit-latency metric is exposed.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from priority_kafka._levels import HasLevelFigures
from priority_kafka.naming import level_group_id, priority_topics, split_priority_topic

__all__ = [
    "EXECUTOR_COUNTERS",
    "EXECUTOR_GAUGES",
    "LATENCY_BUCKETS_S",
    "PROMETHEUS_METRICS",
    "LagReader",
    "LatencyRecorder",
    "Metrics",
    "executor_stats",
    "serve_prometheus",
]

#: Executor counters (monotonic), exported as ``priority_kafka_executor_<name>_total``.
EXECUTOR_COUNTERS = (
    "handled", "dead_lettered", "called_back", "failed", "abandoned", "retries", "commits",
    "commit_failures", "stale_completions", "skipped_redeliveries", "revoked_records",
    "pauses", "skipped_completed", "offset_maps", "offset_map_bytes", "truncated_offset_maps",
    "ignored_offset_maps", "transactions", "aborted_transactions", "outputs",
    "renewed_producers", "membership_rejoins",
)
#: Executor gauges (a value now), exported as ``priority_kafka_executor_<name>_records``.
EXECUTOR_GAUGES = ("in_flight", "queued", "running")
#: Histogram buckets (seconds) for handler duration and end-to-end latency.
LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)

#: Every metric :func:`serve_prometheus` exposes: name -> (type, labels, help).
PROMETHEUS_METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "priority_kafka_consumer_records_returned_total": (
        "counter", ("level",), "Records poll() returned, per priority level."),
    "priority_kafka_consumer_reserved_quota_records": (
        "gauge", ("level",), "Reserved share of max_poll_records, per level."),
    "priority_kafka_consumer_last_quota_records": (
        "gauge", ("level",), "Quota of the last poll (reserved plus any burst), per level."),
    "priority_kafka_consumer_burst_events_total": (
        "counter", ("level",), "Polls in which the level borrowed unused capacity."),
    "priority_kafka_consumer_prefetched_records": (
        "gauge", ("level",), "Records fetched and not yet returned by poll(), per level."),
    "priority_kafka_consumer_paused_partitions": (
        "gauge", ("level",), "Partitions paused now (executor back-pressure), per level."),
    "priority_kafka_consumer_stalled_rebalances_total": (
        "counter", ("level",),
        "Rejoins forced because the level's group was stuck for max(session timeout, 10 s)."),
    "priority_kafka_consumer_lag_records": (
        "gauge", ("topic", "partition", "level"),
        "End offset minus the group's committed offset, per partition."),
    "priority_kafka_consumer_end_offset": (
        "gauge", ("topic", "partition", "level"), "Latest offset of the partition."),
    "priority_kafka_consumer_committed_offset": (
        "gauge", ("topic", "partition", "level"),
        "The group's committed offset (0 when none is committed)."),
    **{
        f"priority_kafka_executor_{name}_total": (
            "counter", (), f"Executor counter {name!r} (ShardedExecutor.stats())."
        )
        for name in EXECUTOR_COUNTERS
    },
    **{
        f"priority_kafka_executor_{name}_records": (
            "gauge", (), f"Records {name.replace('_', ' ')} in the executor now."
        )
        for name in EXECUTOR_GAUGES
    },
    **{
        f"priority_kafka_budget_{name}": (kind, ("resource", "level"), help_text)
        for name, kind, help_text in (
            ("tokens_total", "counter", "Tokens of the resource's budget the level spent."),
            ("granted_total", "counter", "Records of the level granted the resource's tokens."),
            ("waiting_records", "gauge", "Records of the level waiting for a token now."),
            ("wait_seconds_total", "counter", "Time the level's granted records waited."),
            ("rate_records", "gauge",
             "The resource's rate now, tokens/s (this process's share, after AIMD)."),
        )
    },
    "priority_kafka_handler_duration_seconds": (
        "histogram", ("level",), "Time the handler took per record, per level."),
    "priority_kafka_record_latency_seconds": (
        "histogram", ("level",), "Record timestamp to handler end, per level."),
}


def executor_stats(stats: Any) -> dict[str, int]:
    """``ShardedExecutor.stats()`` as a dict with every known counter (absent ones as 0).

    Accepts the dict the executor returns today and an object with ``as_dict()``.
    """
    values = stats.as_dict() if hasattr(stats, "as_dict") else dict(stats)
    return {name: int(values.get(name, 0)) for name in (*EXECUTOR_COUNTERS, *EXECUTOR_GAUGES)}


class LatencyRecorder:
    """Per-level latency histograms (cumulative) plus a window of recent samples (thread-safe).

    ``observe(level, seconds)`` adds one sample; :meth:`histogram` gives Prometheus-style
    cumulative bucket counts; :meth:`percentiles` the p50/p99 of the last ``window`` samples.
    """

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS_S, window: int = 2000) -> None:
        self.buckets = tuple(buckets)
        self._window = window
        self._lock = threading.Lock()
        self._counts: dict[int, list[int]] = {}
        self._sums: dict[int, float] = collections.defaultdict(float)
        self._recent: dict[int, collections.deque[float]] = {}

    def observe(self, level: int, seconds: float) -> None:
        """Record one sample for ``level``."""
        with self._lock:
            counts = self._counts.get(level)
            if counts is None:
                counts = self._counts[level] = [0] * (len(self.buckets) + 1)
                self._recent[level] = collections.deque(maxlen=self._window)
            counts[bisect.bisect_left(self.buckets, seconds)] += 1
            self._sums[level] += seconds
            self._recent[level].append(seconds)

    def histogram(self) -> dict[int, dict[str, Any]]:
        """Per level: ``{"buckets": [(le, cumulative count)...], "count", "sum"}``."""
        with self._lock:
            result = {}
            for level, counts in self._counts.items():
                cumulative, running = [], 0
                for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                    running += count
                    cumulative.append((bound, running))
                result[level] = {"buckets": cumulative, "count": running, "sum": self._sums[level]}
            return result

    def percentiles(self, *qs: float) -> dict[int, dict[float, float]]:
        """Per level, the ``qs`` percentiles (0-100) of the recent samples, in seconds."""
        with self._lock:
            recent = {level: sorted(values) for level, values in self._recent.items()}
        return {
            level: {q: values[min(len(values) - 1, int(q / 100 * len(values)))] for q in qs}
            for level, values in recent.items()
            if values
        }


class LagReader:
    """Committed offsets and end offsets of a group's priority topics, through an admin client.

    ``read()`` returns ``{(topic, partition): {"level", "end", "committed", "lag"}}`` for every
    partition of ``<topic>-0`` .. ``<topic>-(max_priority-1)``; each level's group is
    ``<group_id>-<level>`` (as :class:`~priority_kafka.PriorityConsumer` names them). With
    ``max_priority=None``, ``topic`` is a plain topic read by the group ``group_id``.
    """

    def __init__(
        self, bootstrap_servers: str, topic: str, group_id: str, max_priority: int | None,
        **admin_configs: Any,
    ) -> None:
        """``admin_configs`` are kafka-python ``KafkaAdminClient`` settings, e.g. the
        ``security_protocol``, ``ssl_*`` and ``sasl_*`` ones of a TLS or SASL cluster."""
        from kafka.admin import KafkaAdminClient

        from priority_kafka.kafka_python._kafka import with_client_defaults

        self.topic = topic
        self.group_id = group_id
        self.max_priority = max_priority
        self._admin = KafkaAdminClient(**with_client_defaults(
            {"bootstrap_servers": bootstrap_servers, **admin_configs}))

    def _levels(self) -> dict[str, tuple[int, str]]:
        """Kafka topic -> (level, its group)."""
        if self.max_priority is None:
            return {self.topic: (0, self.group_id)}
        return {
            name: (level, level_group_id(self.group_id, level))
            for name in priority_topics(self.topic, self.max_priority)
            for _, level in [split_priority_topic(name)]
        }

    def read(self) -> dict[tuple[str, int], dict[str, int]]:
        """End offset, committed offset (0 if none) and lag of every partition, per level."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        levels = self._levels()
        partitions = [
            TopicPartition(description["name"], partition["partition_index"])
            for description in self._admin.describe_topics(list(levels))
            for partition in description["partitions"]
        ]
        ends = self._admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        groups = {group for _, group in levels.values()}
        committed = self._admin.list_group_offsets(list(groups))
        result = {}
        for tp in sorted(partitions):
            level, group = levels[tp.topic]
            end = ends[tp].offset
            done = committed.get(group, {}).get(tp)
            offset = done.offset if done is not None and done.offset >= 0 else 0
            result[(tp.topic, tp.partition)] = {
                "level": level, "end": end, "committed": offset, "lag": max(0, end - offset)
            }
        return result

    def close(self) -> None:
        self._admin.close()


def _level_of_topic(topic: str) -> int:
    try:
        return split_priority_topic(topic)[1]
    except ValueError:
        return 0


class Metrics:
    """Everything worth watching about one consumer + executor, read on demand.

    Any part may be absent: ``consumer`` (a PriorityConsumer, or anything with ``paused()``),
    ``executor`` (a ShardedExecutor), ``lag`` (a :class:`LagReader`). Reading is safe from any
    thread while the executor runs: only the consumer's bookkeeping (``metrics()``,
    ``paused()``, no network) is read, and lag comes from the reader's own client.
    """

    def __init__(
        self, consumer: Any = None, executor: Any = None, lag: LagReader | None = None
    ) -> None:
        self.consumer = consumer
        self.executor = executor
        self.lag = lag
        self.handler_duration = LatencyRecorder()
        self.record_latency = LatencyRecorder()
        self._lag_cache: dict[tuple[str, int], dict[str, int]] = {}
        self._lag_lock = threading.Lock()
        self._stopping = threading.Event()
        self._refresher: threading.Thread | None = None

    def start_lag_refresh(self, interval_s: float = 2.0) -> None:
        """Read lag on a background thread every ``interval_s`` (once, however often called),
        so readers of :meth:`snapshot` (``refresh_lag=False``) and scrapes never wait for it."""
        if self.lag is None or self._refresher is not None:
            return

        def refresh() -> None:
            while not self._stopping.is_set():
                with contextlib.suppress(Exception):  # the next round tries again
                    self.refresh_lag()
                self._stopping.wait(interval_s)

        self._refresher = threading.Thread(target=refresh, name="priority-kafka-lag", daemon=True)
        self._refresher.start()

    def close(self) -> None:
        """Stop the lag refresher and close the lag reader."""
        self._stopping.set()
        if self._refresher is not None:
            self._refresher.join(10)
        if self.lag is not None:
            self.lag.close()

    def timed(self, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Wrap a synchronous ``handler`` so each call feeds the latency histograms."""

        def timed_handler(record: Any) -> Any:
            start = time.perf_counter()
            try:
                return handler(record)
            finally:
                ended = time.perf_counter()
                level = _level_of_topic(record.topic)
                self.handler_duration.observe(level, ended - start)
                if record.timestamp and record.timestamp > 0:
                    latency = max(0.0, time.time() - record.timestamp / 1000)
                    self.record_latency.observe(level, latency)

        return timed_handler

    def consumer_levels(self) -> dict[int, dict[str, int]]:
        """Per level: records_returned, reserved_quota, last_quota, burst_count,
        records_prefetched, stalled_rebalances, paused_partitions (empty without a
        PriorityConsumer of either client family).

        Read from the snapshot the consumer's polling thread publishes
        (``level_figures``): no lock, no retry, never a half-updated figure.
        """
        if not isinstance(self.consumer, HasLevelFigures):
            return {}
        return {
            level: {
                "records_returned": figures.records_returned,
                "reserved_quota": figures.reserved_quota,
                "last_quota": figures.last_quota,
                "burst_count": figures.burst_count,
                "records_prefetched": figures.records_prefetched,
                "stalled_rebalances": figures.stalled_rebalances,
                "paused_partitions": figures.paused_partitions,
            }
            for level, figures in self.consumer.level_figures.items()
        }

    def refresh_lag(self) -> dict[tuple[str, int], dict[str, int]]:
        """Read lag now (network); later :meth:`snapshot` calls reuse it until refreshed."""
        if self.lag is None:
            return {}
        fresh = self.lag.read()
        with self._lag_lock:
            self._lag_cache = fresh
        return fresh

    def snapshot(self, refresh_lag: bool = True) -> dict[str, Any]:
        """All metrics as plain data: ``{"levels", "partitions", "executor", "latency"}``."""
        partitions = self._lag_cache
        if refresh_lag and self.lag is not None:
            with contextlib.suppress(Exception):  # broker unreachable: keep the last reading
                partitions = self.refresh_lag()
        executor = executor_stats(self.executor.stats()) if self.executor is not None else {}
        percentiles = self.record_latency.percentiles(50, 99)
        durations = self.handler_duration.percentiles(50, 99)
        return {
            "levels": self.consumer_levels(),
            "partitions": {f"{topic}[{partition}]": dict(values)
                           for (topic, partition), values in partitions.items()},
            "executor": executor,
            "latency": {
                level: {
                    "latency_p50_s": percentiles.get(level, {}).get(50),
                    "latency_p99_s": percentiles.get(level, {}).get(99),
                    "handler_p50_s": durations.get(level, {}).get(50),
                    "handler_p99_s": durations.get(level, {}).get(99),
                }
                for level in sorted(set(percentiles) | set(durations), reverse=True)
            },
        }

    def families(self) -> Iterator[tuple[str, str, str, list[tuple[dict[str, str], Any]]]]:
        """Every metric as ``(name, type, help, [(labels, value)])``; histogram values are the
        :meth:`LatencyRecorder.histogram` entries. Reads lag from the cache only."""
        levels = self.consumer_levels()
        per_level = {
            "priority_kafka_consumer_records_returned_total": "records_returned",
            "priority_kafka_consumer_reserved_quota_records": "reserved_quota",
            "priority_kafka_consumer_last_quota_records": "last_quota",
            "priority_kafka_consumer_burst_events_total": "burst_count",
            "priority_kafka_consumer_prefetched_records": "records_prefetched",
            "priority_kafka_consumer_paused_partitions": "paused_partitions",
            "priority_kafka_consumer_stalled_rebalances_total": "stalled_rebalances",
        }
        for name, key in per_level.items():
            samples: list[tuple[dict[str, str], Any]] = [
                ({"level": str(level)}, values[key]) for level, values in levels.items()
            ]
            yield name, *self._describe(name), samples
        with self._lag_lock:
            partitions = dict(self._lag_cache)
        for name, key in (("priority_kafka_consumer_lag_records", "lag"),
                          ("priority_kafka_consumer_end_offset", "end"),
                          ("priority_kafka_consumer_committed_offset", "committed")):
            samples = [
                ({"topic": topic, "partition": str(partition), "level": str(values["level"])},
                 values[key])
                for (topic, partition), values in sorted(partitions.items())
            ]
            yield name, *self._describe(name), samples
        if self.executor is not None:
            stats = executor_stats(self.executor.stats())
            for counter in EXECUTOR_COUNTERS:
                name = f"priority_kafka_executor_{counter}_total"
                yield name, *self._describe(name), [({}, stats[counter])]
            for gauge in EXECUTOR_GAUGES:
                name = f"priority_kafka_executor_{gauge}_records"
                yield name, *self._describe(name), [({}, stats[gauge])]
            yield from self._budget_metrics()
        for name, recorder in (("priority_kafka_handler_duration_seconds", self.handler_duration),
                               ("priority_kafka_record_latency_seconds", self.record_latency)):
            samples = [({"level": str(level)}, histogram)
                       for level, histogram in sorted(recorder.histogram().items())]
            yield name, *self._describe(name), samples

    def _budget_metrics(self) -> Iterator[tuple[str, str, str, list[tuple[dict[str, str], Any]]]]:
        """The executor's budgets per resource and level (none without budgets)."""
        budget_stats = getattr(self.executor, "budget_stats", None)
        levels = budget_stats() if callable(budget_stats) else {}
        for name, field in (("tokens_total", "tokens"), ("granted_total", "records"),
                            ("waiting_records", "waiting"), ("wait_seconds_total", "wait_s"),
                            ("rate_records", "rate")):
            metric = f"priority_kafka_budget_{name}"
            samples = [({"resource": resource, "level": str(level)}, getattr(stats, field))
                       for resource, by_level in sorted(levels.items())
                       for level, stats in sorted(by_level.items())]
            yield metric, *self._describe(metric), samples

    @staticmethod
    def _describe(name: str) -> tuple[str, str]:
        kind, _, help_text = PROMETHEUS_METRICS[name]
        return kind, help_text


def serve_prometheus(
    metrics: Metrics, port: int, addr: str = "127.0.0.1", lag_refresh_s: float = 2.0
) -> Callable[[], None]:
    """Serve ``metrics`` at ``http://addr:port/metrics``; returns a function that stops it.

    Needs ``prometheus_client`` (``pip install 'priority-kafka[metrics]'``). Lag is read by a
    background thread every ``lag_refresh_s`` seconds (:meth:`Metrics.start_lag_refresh`), so a
    scrape never waits for the broker; :meth:`Metrics.close` stops that thread.
    """
    try:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )
    except ImportError as exc:
        raise ImportError(
            "metrics over HTTP need prometheus_client: pip install 'priority-kafka[metrics]'"
        ) from exc

    class _Collector:
        def collect(self) -> Iterator[Any]:
            for name, kind, help_text, samples in metrics.families():
                labels = sorted({key for sample_labels, _ in samples for key in sample_labels})
                labels = list(PROMETHEUS_METRICS[name][1]) or labels
                if kind == "counter":
                    family: Any = CounterMetricFamily(
                        name.removesuffix("_total"), help_text, labels=labels)
                elif kind == "gauge":
                    family = GaugeMetricFamily(name, help_text, labels=labels)
                else:
                    family = HistogramMetricFamily(name, help_text, labels=labels)
                for sample_labels, value in samples:
                    values = [sample_labels[label] for label in labels]
                    if kind == "histogram":
                        family.add_metric(
                            values,
                            [(_le(bound), count) for bound, count in value["buckets"]],
                            value["sum"],
                        )
                    else:
                        family.add_metric(values, value)
                yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    server, thread = start_http_server(port, addr=addr, registry=registry)
    metrics.start_lag_refresh(lag_refresh_s)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return stop


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
