"""priority_kafka.metrics: the stats accessor and the latency recorder (no broker needed)."""

from __future__ import annotations

import pytest

from priority_kafka.metrics import (
    EXECUTOR_COUNTERS,
    EXECUTOR_GAUGES,
    PROMETHEUS_METRICS,
    LatencyRecorder,
    Metrics,
    executor_stats,
)


class _TypedStats:
    def as_dict(self) -> dict[str, int]:
        return {"handled": 5, "queued": 2}


@pytest.mark.parametrize("stats", [{"handled": 5, "queued": 2}, _TypedStats()])
def test_executor_stats_reads_a_dict_or_a_typed_object(stats):
    """Either shape of ShardedExecutor.stats() gives every counter, absent ones as 0."""
    values = executor_stats(stats)
    assert set(values) == {*EXECUTOR_COUNTERS, *EXECUTOR_GAUGES}
    assert values["handled"] == 5 and values["queued"] == 2 and values["retries"] == 0


def test_latency_recorder_buckets_are_cumulative_and_percentiles_recent():
    """Histogram buckets count samples at or below each bound; percentiles come from samples."""
    recorder = LatencyRecorder(buckets=(0.01, 0.1), window=100)
    for seconds in (0.005, 0.01, 0.05, 0.5):
        recorder.observe(2, seconds)
    histogram = recorder.histogram()[2]
    assert histogram["buckets"] == [(0.01, 2), (0.1, 3), (float("inf"), 4)]
    assert histogram["count"] == 4 and histogram["sum"] == pytest.approx(0.565)
    assert recorder.percentiles(50, 99)[2] == {50: 0.05, 99: 0.5}


def test_prometheus_names_follow_the_conventions():
    """Counters end in _total, histograms in _seconds, gauges name a unit; all are prefixed."""
    for name, (kind, _, _) in PROMETHEUS_METRICS.items():
        assert name.startswith("priority_kafka_")
        if kind == "counter":
            assert name.endswith("_total")
        elif kind == "histogram":
            assert name.endswith("_seconds")
        else:
            assert name.endswith(("_records", "_partitions", "_offset"))


def test_consumer_levels_read_the_published_figures_of_either_family():
    """Metrics reads a consumer's level_figures snapshot (no getattr probe, no retry); a consumer
    without them has no level figures."""
    from types import MappingProxyType

    from priority_kafka._levels import LevelFigures

    class Published:
        level_figures = MappingProxyType({1: LevelFigures(
            reserved_quota=33, last_quota=40, window=(33, 40), burst_count=2,
            records_returned=73, records_prefetched=5, stalled_rebalances=1, paused_partitions=2,
        )})

    assert Metrics(Published()).consumer_levels() == {1: {
        "records_returned": 73, "reserved_quota": 33, "last_quota": 40, "burst_count": 2,
        "records_prefetched": 5, "stalled_rebalances": 1, "paused_partitions": 2,
    }}
    assert Metrics(object()).consumer_levels() == {}
