"""What the failover scenarios on the 3-node cluster share: both client families under traffic
at once, each on a replicated priority topic of its own, and a record of each fault (a node
stopped, killed or cut off) with what it did to every partition of each.

One fault serves both families: each has its own producer, topic and executor (kafka-python
end to end, confluent end to end), and the same node goes down under both. Per fault, family
and partition: its leader before, how long until a new leader was elected (when the fault
took its leader), and the seconds from the fault to the first record *sent after* it and
handled, the moment that partition flowed again end to end (produce, replication to the
in-sync replicas, high watermark, fetch, handler). Per family: the level-2 p50 and p99 of
send-to-handler latency over the records sent during the faults (from each fault until the
cluster was whole and in sync again) against the same over a steady window before the first.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks._running import wait_for
from benchmarks._traffic import LEVELS, Tally
from priority_kafka import create_priority_topics
from priority_kafka.testing import LocalKafkaCluster
from tests.conftest import names_having
from tests.faults.common import Load, under_load

PARTITIONS = 2  # per level, as under_load creates them
RATE = 200  # records/s per family: two families share the machine with three brokers
#: Seconds every partition has to flow again after a fault (bounds, not expectations).
FLOW_TIMEOUT_S = 90.0

Where = tuple[str, int, int]  # family, level, partition


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1)


def _p50(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2], 1) if values else None


def _span(values: list[float]) -> list[float] | None:
    return [round(min(values), 2), round(max(values), 2)] if values else None


def _seconds(times: Mapping[tuple[int, int], float]) -> dict[str, float]:
    return {f"{level}-{p}": round(t, 2) for (level, p), t in sorted(times.items())}


class _LeaderWatch:
    """Polls the leaders of the partitions ``broker`` led, on a thread, noting when each got
    another (seconds from ``start``); a poll that hangs on a cut-off node delays the note."""

    def __init__(self, failover: Failover, broker: int, led: list[Where]) -> None:
        self._failover, self._broker, self._led = failover, broker, led
        self.elected: dict[Where, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)
        self._start = 0.0

    def start(self, start: float) -> None:
        self._start = start
        self._thread.start()

    def done(self) -> bool:
        return len(self.elected) == len(self._led)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self.done() and not self._stop.is_set():
            try:
                now = self._failover.all_leaders()
            except Exception:  # a node going away mid-request; asked again
                now = {}
            for where in self._led:
                if where not in self.elected and now.get(where) not in (None, self._broker):
                    self.elected[where] = time.monotonic() - self._start
            self._stop.wait(0.2)


class Failover:
    """The faults of one scenario on ``cluster`` under each family's traffic: ``streams``
    maps a family to its topic and tally.

    Construction waits until what was produced while the consumers joined is handled, then
    ``steady_s`` seconds of traffic (every record sent in them handled): the steady window
    the failover windows are compared with.
    """

    def __init__(
        self, cluster: LocalKafkaCluster, streams: Mapping[str, tuple[str, Tally]],
        steady_s: float,
    ) -> None:
        self.cluster, self.streams = cluster, dict(streams)
        self.records: dict[str, list[dict[str, Any]]] = {family: [] for family in streams}
        self.windows: list[tuple[float, float]] = []
        joined = time.monotonic()
        wait_for(lambda: all(tally.caught_up_after(joined) is not None
                             for _, tally in self.streams.values()),
                 90, "the records produced while the consumers joined to be handled")
        start = time.monotonic()
        self.steady = (start, start + steady_s)
        wait_for(lambda: time.monotonic() >= self.steady[1] and all(
            tally.caught_up_after(self.steady[1]) is not None
            for _, tally in self.streams.values()),
            steady_s + 60, "the steady window's records to be handled")

    @property
    def faults(self) -> list[dict[str, Any]]:
        """The faults so far, as the first family saw them."""
        return self.records[next(iter(self.streams))]

    def leaders(self) -> dict[tuple[int, int], int | None]:
        """(level, partition) -> its leader now, on the first family's topic."""
        first = next(iter(self.streams))
        return {(lv, p): leader for (family, lv, p), leader in self.all_leaders().items()
                if family == first}

    def all_leaders(self) -> dict[Where, int | None]:
        return {(family, level, partition): leader
                for family, (topic, _) in self.streams.items() for level in range(LEVELS)
                for partition, leader in self.cluster.leaders(f"{topic}-{level}").items()}

    def fault(
        self, label: str, broker: int, action: Callable[[], None], restore: Callable[[], None],
        *, hold_s: float = 0.0, flows_during: bool = True,
    ) -> None:
        """``action()`` (the fault on node ``broker``), keep it ``hold_s`` seconds after
        ``action`` returned, then ``restore()`` and wait until every partition is in sync.

        ``flows_during``: wait, before ``restore()``, until the partitions ``broker`` led have
        new leaders and every partition flows again, and keep the fault on until then.
        Otherwise (writes refused until the node is back, or clients that wait on a cut-off
        node until their request timeout) the flow is waited for after ``restore()``, and
        ``first_record_after_restore_s`` says how long it took from there."""
        led = sorted(where for where, leader in self.all_leaders().items() if leader == broker)
        controller = self.cluster.active_controller()
        watch = _LeaderWatch(self, broker, led)
        failed: list[BaseException] = []

        def act() -> None:
            try:
                action()
            except BaseException as exc:  # re-raised below
                failed.append(exc)

        # On their own threads: a controlled shutdown returns once the node has exited, and
        # its leaderships move (and records flow) before that; asking a cut-off node for
        # metadata hangs until the request times out, and the fault goes on meanwhile.
        acting = threading.Thread(target=act, name="fault-action", daemon=True)
        start = time.monotonic()
        watch.start(start)
        acting.start()
        acting.join(FLOW_TIMEOUT_S)
        if failed or acting.is_alive():
            watch.stop()
            raise AssertionError(f"{label} failed or hung: {failed}")
        acted = time.monotonic()
        if flows_during:
            wait_for(watch.done, FLOW_TIMEOUT_S, f"new leaders after {label}")
            self._wait_flowing(start, label)
        # The fault lasts this long whatever happens meanwhile: there is no event to wait on.
        time.sleep(max(0.0, acted + hold_s - time.monotonic()))
        restored = time.monotonic()
        restore()
        if not flows_during:
            self._wait_flowing(start, label)
            self._wait_flowing(restored, label)
        self.cluster.wait_in_sync()
        watch.stop()
        end = time.monotonic()
        self.windows.append((start, end))
        for family, (_, tally) in self.streams.items():
            record = {
                "fault": label, "broker": broker, "active_controller": controller,
                "window_s": round(end - start, 1),
                "restored_at_s": round(restored - start, 2),
                "led": [f"{lv}-{p}" for f, lv, p in led if f == family],
                "new_leader_s": _seconds({(lv, p): t for (f, lv, p), t in watch.elected.items()
                                         if f == family}),
                "first_record_s": _seconds(tally.first_sent_after(start)),
            }
            if not flows_during:
                record["first_record_after_restore_s"] = _seconds(
                    tally.first_sent_after(restored))
            self.records[family].append(record)

    def _wait_flowing(self, start: float, label: str) -> None:
        def flowing() -> bool:
            return all(len(tally.first_sent_after(start)) == LEVELS * PARTITIONS
                       for _, tally in self.streams.values())

        try:
            wait_for(flowing, FLOW_TIMEOUT_S,
                     f"a record sent after {label} handled on every partition")
        except AssertionError as exc:
            # Which partitions, and whether their records were not acknowledged (producer,
            # broker) or acknowledged and not handled (consumer).
            state = {family: {"flowing": sorted(tally.first_sent_after(start)),
                              "sent since": tally.since(start)}
                     for family, (_, tally) in self.streams.items()}
            raise AssertionError(
                f"{exc}; {state}; leaders now: {self.all_leaders()}") from None

    def figures(self, family: str) -> dict[str, Any]:
        """``family``'s faults, and across them: the first-record times of the partitions
        whose leader the fault took and of the others, and the level-2 p50 and p99 (ms) in
        the steady and the failover windows."""
        records = self.records[family]
        tally = self.streams[family][1]
        moved = [t for f in records for where, t in f["first_record_s"].items()
                 if where in f["led"]]
        kept = [t for f in records for where, t in f["first_record_s"].items()
                if where not in f["led"]]
        steady = tally.latencies_ms(LEVELS - 1, [self.steady])
        during = tally.latencies_ms(LEVELS - 1, self.windows)
        return {
            "faults": records,
            "first_record_s_leader_moved": _span(moved),
            "first_record_s_leader_kept": _span(kept),
            "level2_p99_ms": {"steady": _p99(steady), "failover": _p99(during)},
            "level2_p50_ms": {"steady": _p50(steady), "failover": _p50(during)},
            "level2_records": {"steady": len(steady), "failover": len(during)},
        }


def run_failover(
    cluster: LocalKafkaCluster, name: str, scenario: str, report: Any,
    faults: Callable[[Failover], dict[str, Any] | None], full: bool, min_insync: int = 2,
) -> dict[str, dict[str, Any]]:
    """Run ``faults(failover)`` once under both families' traffic, each on a topic of its own
    (``name``-<family>: 3 replicas, ``min_insync`` in-sync replicas), producer and consumer
    of one family each (the producer with ``acks=all`` and idempotence); report each
    family's figures as ``scenario`` and check what every failover scenario promises: nothing
    acknowledged lost, no key out of order, no send failed. The steady window is 3 s of
    traffic (``full``: 10 s). Returns the figures by family."""
    topics = {family: f"{name}-{family.split('-')[0]}" for family in names_having("synchronous")}
    for topic in topics.values():
        create_priority_topics(cluster.bootstrap_servers, topic, LEVELS,
                               num_partitions=PARTITIONS, replication_factor=3,
                               min_insync_replicas=min_insync)
    cluster.wait_in_sync()
    loads: dict[str, Load] = {}
    with contextlib.ExitStack() as stack:
        for family, topic in topics.items():
            loads[family] = stack.enter_context(under_load(
                cluster.bootstrap_servers, topic, rate=RATE, client=family,
                producer_client=family, producer_configs={"acks": "all"}))
        failover = Failover(cluster, {f: (topics[f], load.tally) for f, load in loads.items()},
                            steady_s=10 if full else 3)
        try:
            extra = faults(failover) or {}
        except BaseException:
            # What the faults did so far, for the failure's diagnosis.
            print(f"fault figures so far: {json.dumps(failover.records)}")
            raise
    figures = {family: {**load.figures(), **extra, **failover.figures(family)}
               for family, load in loads.items()}
    for family, figure in figures.items():
        report(f"{scenario} ({family})", **figure)
    for figure in figures.values():
        assert figure["lost"] == 0 and figure["order_violations"] == 0, figures
        assert figure["send_failures"] == 0, figures
    return figures
