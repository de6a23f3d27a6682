"""What the failover scenarios on the 3-node cluster share: a replicated priority topic, and a
record of each fault (a node stopped, killed or cut off) with what it did to every partition.

Per fault and partition: its leader before, how long until a new leader was elected (when the
fault took its leader), and the seconds from the fault to the first record *sent after* it and
handled, the moment that partition flowed again end to end (produce, replication to the
in-sync replicas, high watermark, fetch, handler). Per scenario: the level-2 p99 of
send-to-handler latency over the records sent during the faults (from each fault until the
cluster was whole and in sync again) against the same over a steady window before the first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from priority_kafka import create_priority_topics
from priority_kafka.testing import LocalKafkaCluster
from tests.faults.common import LEVELS, Tally
from tests.test_executor import wait_for

PARTITIONS = 2  # per level, as run_under_load creates them
#: Seconds every partition has to flow again after a fault (bounds, not expectations).
FLOW_TIMEOUT_S = 90.0


def replicated_topic(cluster: LocalKafkaCluster, name: str, min_insync: int = 2) -> str:
    """Create ``name``'s levels with 3 replicas and ``min_insync`` in-sync replicas."""
    create_priority_topics(cluster.bootstrap_servers, name, LEVELS, num_partitions=PARTITIONS,
                           replication_factor=3, min_insync_replicas=min_insync)
    cluster.wait_in_sync()
    return name


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1)


def _p50(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2], 1) if values else None


def _span(values: list[float]) -> list[float] | None:
    return [round(min(values), 2), round(max(values), 2)] if values else None


class _LeaderWatch:
    """Polls the leaders of the partitions ``broker`` led, on a thread, noting when each got
    another (seconds from ``start``); a poll that hangs on a cut-off node delays the note."""

    def __init__(self, failover: Failover, broker: int, led: list[tuple[int, int]]) -> None:
        self._failover, self._broker, self._led = failover, broker, led
        self.elected: dict[tuple[int, int], float] = {}
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
                now = self._failover.leaders()
            except Exception:  # a node going away mid-request; asked again
                now = {}
            for where in self._led:
                if where not in self.elected and now.get(where) not in (None, self._broker):
                    self.elected[where] = time.monotonic() - self._start
            self._stop.wait(0.2)


class Failover:
    """The faults of one scenario on ``cluster`` under the traffic ``tally`` counts.

    Construction waits ``steady_s`` seconds of traffic (every record sent in them handled):
    the steady window the failover windows are compared with.
    """

    def __init__(
        self, cluster: LocalKafkaCluster, topic: str, tally: Tally, steady_s: float
    ) -> None:
        self.cluster, self.topic, self.tally = cluster, topic, tally
        self.faults: list[dict[str, Any]] = []
        self.windows: list[tuple[float, float]] = []
        start = time.monotonic()
        self.steady = (start, start + steady_s)
        wait_for(lambda: time.monotonic() >= self.steady[1]
                 and tally.caught_up_after(self.steady[1]) is not None,
                 steady_s + 60, "the steady window's records to be handled")

    def leaders(self) -> dict[tuple[int, int], int | None]:
        """(level, partition) -> the id of its leader now."""
        return {(level, partition): leader for level in range(LEVELS)
                for partition, leader in self.cluster.leaders(f"{self.topic}-{level}").items()}

    def fault(
        self, label: str, broker: int, action: Callable[[], None], restore: Callable[[], None],
        *, hold_s: float = 0.0, flows_during: bool = True,
    ) -> dict[str, Any]:
        """``action()`` (the fault on node ``broker``), keep it ``hold_s`` seconds after
        ``action`` returned, then ``restore()`` and wait until every partition is in sync.

        ``flows_during``: wait, before ``restore()``, until the partitions ``broker`` led have
        new leaders and every partition flows again, and keep the fault on until then.
        Otherwise (writes refused until the node is back, or clients that wait on a cut-off
        node until their request timeout) the flow is waited for after ``restore()``, and
        ``first_record_after_restore_s`` says how long it took from there."""
        before = self.leaders()
        led = sorted(where for where, leader in before.items() if leader == broker)
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

        def seconds(times: dict[tuple[int, int], float]) -> dict[str, float]:
            return {f"{lv}-{p}": round(t, 2) for (lv, p), t in sorted(times.items())}

        record = {
            "fault": label, "broker": broker, "window_s": round(end - start, 1),
            "restored_at_s": round(restored - start, 2),
            "led": [f"{level}-{p}" for level, p in led],
            "new_leader_s": seconds(watch.elected),
            "first_record_s": seconds(self.tally.first_sent_after(start)),
        }
        if not flows_during:
            record["first_record_after_restore_s"] = seconds(
                self.tally.first_sent_after(restored))
        self.faults.append(record)
        return record

    def _wait_flowing(self, start: float, label: str) -> None:
        wait_for(lambda: len(self.tally.first_sent_after(start)) == LEVELS * PARTITIONS,
                 FLOW_TIMEOUT_S, f"a record sent after {label} handled on every partition")

    def figures(self) -> dict[str, Any]:
        """The faults, and across them: the first-record times of the partitions whose leader
        the fault took and of the others, and the level-2 p99 (ms) in the steady and the
        failover windows."""
        moved = [t for f in self.faults for where, t in f["first_record_s"].items()
                 if where in f["led"]]
        kept = [t for f in self.faults for where, t in f["first_record_s"].items()
                if where not in f["led"]]
        steady = self.tally.latencies_ms(LEVELS - 1, [self.steady])
        during = self.tally.latencies_ms(LEVELS - 1, self.windows)
        return {
            "faults": self.faults,
            "first_record_s_leader_moved": _span(moved),
            "first_record_s_leader_kept": _span(kept),
            "level2_p99_ms": {"steady": _p99(steady), "failover": _p99(during)},
            "level2_p50_ms": {"steady": _p50(steady), "failover": _p50(during)},
            "level2_records": {"steady": len(steady), "failover": len(during)},
        }
