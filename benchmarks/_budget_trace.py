"""Where a level-2 record of the budgets benchmark spends its time (``--trace``).

Per stamped record (``time.perf_counter()`` throughout): ``produced`` (its stamp),
``appended`` (the broker appended it: its LogAppendTime, which the benchmark's topics then
use, in milliseconds), ``polled`` (the executor's poll returned it), ``lane`` (it joined its
lane at the budget gate, or the pool without budgets), ``granted`` (it left the gate),
``started`` and ``ended`` (the handler), ``accepted`` (the downstream's own clock when it
accepted the call). The summary gives each step's p50 / p90 / p99 / max in milliseconds, and
two spans: ``produced->ended`` (end to end: the producer, the broker, the fetch and the poll,
then the library and the handler) and ``polled->ended`` (from the record's arrival in the
consumer, the poll returning it, to the handler's end: the library's part and the call); how
many records started within 1 ms of the end of the record before them on their lane (one
partition: the same key; queued behind their own lane, not the flood); how late the gate's
thread woke while records waited, and how often a rebalance re-divided its budgets in the
span; and the executor's polls: how many, and how many had a timeout of 0 (they return at
once, so a record arriving meanwhile waits for a later poll).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._common import percentile
from benchmarks._consumers import is_stamped, stamp_of

__all__ = ["Trace"]

STAGES = ("produced", "appended", "polled", "lane", "granted", "started", "accepted", "ended")
# A record that started this soon after its lane's previous one ended queued behind it.
_BEHIND_S = 0.001


class _PollTraced:
    """The executor's consumer adapter (slotted), with its polls traced."""

    def __init__(self, consumer: Any, trace: Trace) -> None:
        self._consumer, self._trace = consumer, trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        timeout = kwargs.get("timeout_ms", args[0] if args else None)
        batch = self._consumer.poll(*args, **kwargs)
        records = [r for records in (batch or {}).values() for r in records]
        self._trace._mark(records, "polled")
        self._trace.polls.append((timeout, bool(records)))
        return batch


class Trace:
    """The stages of the stamped records of ``executor``: call :meth:`handler_started` and
    :meth:`handler_ended` from the handler; :meth:`summary` at the end."""

    def __init__(self, executor: Any, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._times: dict[float, dict[str, float]] = {}
        self._keys: dict[float, Any] = {}  # each stamped record's key: its lane
        self._grants: list[float] = []  # when the gate granted each record
        #: Each executor poll's timeout (ms) and whether it returned records.
        self.polls: list[tuple[Any, bool]] = []
        # The broker's wall clock (LogAppendTime) on this clock: ms resolution.
        self._wall_offset = time.time() - clock()
        executor._consumer = _PollTraced(executor._consumer, self)
        gate = executor._gate
        if gate is None:
            pool = executor._pool
            push = pool.push

            def traced_push(items: Any) -> None:
                items = list(items)
                self._mark((r for item in items for r in item[3]), "lane")
                push(items)

            pool.push = traced_push
            return
        gate_push, gate_pass = gate.push, gate._pass

        def traced_gate_push(items: Any, direct: Any) -> None:
            items = list(items)
            self._mark((r for item in items for r in item[3]), "lane")
            gate_push(items, direct)

        def traced_pass(entry: Any, now: float, out: Any) -> None:
            self._mark((entry.record,), "granted")
            self._grants.append(self._clock())
            gate_pass(entry, now, out)

        gate.push, gate._pass = traced_gate_push, traced_pass
        self._gate_lateness(gate)

    def _gate_lateness(self, gate: Any) -> None:
        """How late the gate's thread woke for the time its budgets asked, while records
        waited, and the tokens its budgets lost to a full bucket meanwhile."""
        asked = [float("inf")]
        self.lateness: list[float] = []
        self.lost_tokens = 0.0
        grant = gate._grant

        def traced_grant(now: float) -> Any:
            if now > asked[0]:
                self.lateness.append(now - asked[0])
            asked[0] = float("inf")
            return grant(now)

        gate._grant = traced_grant
        # Each re-division of the budgets (a rebalance of a level's group) starts a period.
        self.share_changes: list[float] = []
        set_shares = gate.set_shares

        def traced_set_shares(shares: Any) -> None:
            self.share_changes.append(self._clock())
            set_shares(shares)

        gate.set_shares = traced_set_shares
        for core in gate._cores.values():
            self._core_lateness(core, asked)

    def _core_lateness(self, core: Any, asked: list[float]) -> None:
        wake_at, skip_lost = core.wake_at, core._skip_lost

        def traced_wake_at(now: float) -> float:
            wake = wake_at(now)
            asked[0] = min(asked[0], wake)
            return wake

        def traced_skip_lost(now: float) -> None:
            filled = core._filled
            skip_lost(now)
            self.lost_tokens += (core._filled - filled) * core.local_rate

        core.wake_at, core._skip_lost = traced_wake_at, traced_skip_lost

    def _mark(self, records: Any, stage: str) -> None:
        now = self._clock()
        with self._lock:
            for record in records:
                value = getattr(record, "value", None)
                if isinstance(value, bytes) and is_stamped(value):
                    times = self._times.get(stamp_of(value))
                    if times is None:
                        times = self._times[stamp_of(value)] = {"produced": stamp_of(value)}
                        self._keys[stamp_of(value)] = getattr(record, "key", None)
                        appended = getattr(record, "timestamp", None)
                        if getattr(record, "timestamp_type", None) == 1 and appended:
                            times["appended"] = appended / 1000 - self._wall_offset
                    times.setdefault(stage, now)

    def handler_started(self, record: Any) -> None:
        """The handler began ``record`` (its first attempt counts)."""
        self._mark((record,), "started")

    def handler_ended(self, record: Any, accepted: float | None) -> None:
        """The downstream accepted ``record``'s call at ``accepted`` (its clock, converted to
        this one's by the caller) and the handler returns."""
        self._mark((record,), "ended")
        if accepted is not None:
            with self._lock:
                times = self._times.get(stamp_of(record.value))
                if times is not None:
                    times["accepted"] = accepted

    def summary(self, since: float, until: float) -> dict[str, Any]:
        """Each step's p50 / p90 / p99 / max in ms over the records that completed every stage
        seen, and the records that started right as their lane's previous one ended; the gate's
        grants a second in [since, until) (this clock's time)."""
        done = sorted((t for t in self._times.values() if "ended" in t),
                      key=lambda t: t["produced"])
        stages = [s for s in STAGES if done and all(s in t for t in done)]
        spans = [*itertools.pairwise(stages), ("produced", "ended"), ("polled", "ended")]
        steps: dict[str, dict[str, float]] = {}
        for before, after in spans:
            if before not in stages or after not in stages:
                continue
            ms = [1000 * (t[after] - t[before]) for t in done]
            steps[f"{before}->{after}"] = {
                "p50": round(percentile(ms, 50), 1), "p90": round(percentile(ms, 90), 1),
                "p99": round(percentile(ms, 99), 1),
                "max": round(max(ms), 1)}
        behind, last = 0, {}
        for t in done:
            previous = last.get(self._keys[t["produced"]])
            if previous is not None and t["started"] - previous["ended"] < _BEHIND_S \
                    and t.get("lane", t["started"]) < previous["ended"]:
                behind += 1
            last[self._keys[t["produced"]]] = t
        late = [1000 * s for s in getattr(self, "lateness", [])]
        gate = {} if not late else {
            "wakes_late": len(late), "late_ms_p50": round(percentile(late, 50), 1),
            "late_ms_p90": round(percentile(late, 90), 1),
            "late_ms_p99": round(percentile(late, 99), 1), "late_ms_max": round(max(late), 1),
            "late_s_total": round(sum(late) / 1000, 2),
            "tokens_lost_to_full_bucket": round(self.lost_tokens),
            "share_changes_in_span": sum(1 for t in self.share_changes if since <= t < until),
            "granted_per_s": round(sum(1 for t in self._grants if since <= t < until)
                                   / max(1e-9, until - since), 1)}
        polls = {"polls": len(self.polls),
                 "timeout_0": sum(1 for timeout, _ in self.polls if not timeout),
                 "with_records": sum(1 for _, got in self.polls if got)}
        return {"records": len(done), "steps_ms": steps, "queued_behind_own_lane": behind,
                "gate": gate, "executor_polls": polls}
