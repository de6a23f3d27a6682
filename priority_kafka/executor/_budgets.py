"""Records wait for their resource's budget in their lane, before the workers see them.

:class:`BudgetGate` sits between the polling thread and the :class:`WorkerPool`: each record
joins its lane (the pool's lane: same key of the same partition, or same partition); only the
head of a lane asks its resource's :class:`~priority_kafka.budgets.TokenBudget` for tokens, and
the gate's thread pushes a granted head to the pool, whose lane runs it after the lane's earlier
records. So a waiting record holds no worker, and a lane keeps its order.

A call that is throttled (the handler raises or returns
:class:`~priority_kafka.budgets.Throttled`) or retried after a failure takes a token again; it
waits for it on its worker, first among its level's waiters (its lane cannot go on anyway),
and the throttle's call spends no attempt of the retry policy.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Any

import attrs

from priority_kafka._checks import shown
from priority_kafka._rebalance import ChainedListener
from priority_kafka._structs import TopicPartition
from priority_kafka._types import Levels
from priority_kafka._workers import Counters, Item, RecordHandler, Undeserializable, WorkerPool
from priority_kafka.budgets import Budgets, Throttled, TokenBudget
from priority_kafka.errors import ConfigError
from priority_kafka.sharding import Ordering

log = logging.getLogger(__name__)

__all__ = ["BudgetGate", "BudgetShares", "BudgetStats", "BudgetedPool", "gate_for",
           "partition_counter"]

# Heads of one level a grant looks at: enough for any burst, and a backlog of key lanes costs
# no more than this per grant.
_LOOK_AHEAD = 64
# How often a worker waiting for a token looks whether the executor closes.
_CLOSE_CHECK_S = 0.1


@attrs.frozen
class BudgetStats:
    """One level of one resource: ``tokens`` spent and ``records`` granted so far,
    ``waiting`` records now, ``wait_s`` their total wait for a token so far, ``borrowing``:
    whether the level borrows idle levels' tokens in this period; and the resource's ``rate``
    now (AIMD-adjusted, this process's share) and ``throttles``."""

    tokens: int
    records: int
    waiting: int
    wait_s: float
    borrowing: bool
    rate: float
    throttles: int


class _Entry:
    """A record waiting for tokens: in a lane (from a poll) or on a worker (``event``)."""

    __slots__ = ("cost", "event", "group", "lane", "level", "record", "resource", "since", "tp")

    def __init__(self, level: int, tp: TopicPartition, group: Any, record: Any,
                 resource: str, cost: int, lane: Hashable, event: threading.Event | None) -> None:
        self.level, self.tp, self.group, self.record = level, tp, group, record
        self.resource, self.cost, self.lane, self.event = resource, cost, lane, event
        self.since = time.monotonic()


class BudgetGate:
    """The lanes waiting for budgets, and the thread that grants them (see the module doc).

    ``weights``: the consumer's reserved share per level; ``level_of``: a topic's level.
    Thread use: :meth:`push`, :meth:`discard` from the polling thread or a rebalance hook;
    the wrapped handler from workers; one lock for all.
    """

    def __init__(self, budgets: Budgets, weights: Mapping[int, int], ordering: Ordering,
                 level_of: Callable[[str], int], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._budgets = budgets
        self._ordering = ordering
        self._level_of = level_of
        self._clock = clock
        now = clock()
        levels = {level: weights[level] for level in sorted(weights)}
        self._cores = {name: TokenBudget(budget, levels, now)
                       for name, budget in budgets.resources.items()}
        self._heads: dict[str, dict[int, deque[_Entry]]] = {
            name: {level: deque() for level in reversed(levels)} for name in self._cores
        }
        self._lanes: dict[Hashable, deque[_Entry]] = {}
        self._waiting = {(name, level): 0 for name in self._cores for level in levels}
        self._wait_s = dict.fromkeys(self._waiting, 0.0)
        # id -> (record, its resource, cost, grant time): granted by the gate, not called yet.
        self._granted: dict[int, tuple[Any, str, int, float]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._unordered = itertools.count()
        #: Re-divides the budgets on every rebalance (subscribe through the executor).
        self.shares: BudgetShares | None = None

    def __repr__(self) -> str:
        return f"BudgetGate(resources={sorted(self._cores)}, waiting={self.waiting()})"

    # -- the polling thread -----------------------------------------------------------------

    def push(self, items: Iterable[Item], direct: Callable[[list[Item]], None]) -> None:
        """Queue records in their lanes; undeserializable ones (no handler call, so no token)
        go to the pool at once through ``direct``."""
        bypass: list[Item] = []
        with self._cond:
            for level, tp, group, records in items:
                for record in records:
                    if type(record) is Undeserializable:
                        bypass.append((level, tp, group, [record]))
                        continue
                    entry = _Entry(level, tp, group, record, self._budgets.resource_of(record),
                                   self._budgets.cost_of(record), self._lane(tp, record), None)
                    lane = self._lanes.get(entry.lane)
                    if lane is None:
                        lane = self._lanes[entry.lane] = deque()
                    lane.append(entry)
                    self._waiting[entry.resource, level] += 1
                    if len(lane) == 1:
                        self._heads[entry.resource][level].append(entry)
            self._cond.notify()
        if bypass:
            direct(bypass)

    def _lane(self, tp: TopicPartition, record: Any) -> Hashable:
        if self._ordering == "key":
            return (tp, record.key)
        if self._ordering == "partition":
            return tp
        return (tp, next(self._unordered))

    def discard(self, partitions: Collection[TopicPartition] | None) -> int:
        """Drop the waiting records of ``partitions`` (None: all); return how many."""
        dropped = 0
        with self._cond:
            for key, lane in list(self._lanes.items()):
                if partitions is None or lane[0].tp in partitions:
                    for entry in lane:
                        self._waiting[entry.resource, entry.level] -= 1
                    dropped += len(lane)
                    del self._lanes[key]
            for heads in self._heads.values():
                for level, queue in heads.items():
                    heads[level] = deque(
                        e for e in queue if e.event is not None or e.lane in self._lanes
                    )
            for key, (record, resource, cost, granted_at) in list(self._granted.items()):
                if partitions is None or any(
                    (record.topic, record.partition) == (tp.topic, tp.partition)
                    for tp in partitions
                ):
                    del self._granted[key]
                    self._cores[resource].dropped(granted_at, cost)
        return dropped

    def waiting(self) -> int:
        """Records waiting for a token now."""
        with self._cond:
            return sum(self._waiting.values())

    def drain_s(self) -> float:
        """About how long the gate feeds the workers with what it holds now without the
        polling thread: its busiest resource's waiting records at that resource's rate."""
        with self._cond:
            return max((sum(self._waiting[name, level] for level in self._heads[name])
                        / core.local_rate if core.local_rate else 0.0
                        for name, core in self._cores.items()), default=0.0)

    def stats(self) -> dict[str, dict[int, BudgetStats]]:
        """Per resource and level, highest level first (see :class:`BudgetStats`)."""
        with self._cond:
            now = self._clock()
            for core in self._cores.values():
                core.settle(now)
            return {
                name: {
                    level: BudgetStats(
                        spend.tokens, spend.records, self._waiting[name, level],
                        self._wait_s[name, level], core.borrowing == level, core.local_rate,
                        core.throttles,
                    )
                    for level, spend in core.spent().items()
                }
                for name, core in self._cores.items()
            }

    def listener(self, user: Any) -> Any:
        """``user``'s rebalance listener run after :attr:`shares` follows the assignment."""
        return user if self.shares is None else ChainedListener(self.shares, user)

    def set_shares(self, shares: Mapping[int, float]) -> None:
        """This process's part of each level's partitions (see TokenBudget.set_shares)."""
        with self._cond:
            now = self._clock()
            for core in self._cores.values():
                core.set_shares(shares, now)
            self._cond.notify()

    # -- the gate's thread ------------------------------------------------------------------

    def start(self, push: Callable[[list[Item]], None]) -> None:
        """Start granting: granted records go to ``push`` (the pool's), in lane order."""
        self._thread = threading.Thread(
            target=self._serve, args=(push,), name="priority-kafka-budgets", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; workers waiting for a token give up (their record is abandoned)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _serve(self, push: Callable[[list[Item]], None]) -> None:
        with self._cond:
            while not self._closed:
                now = self._clock()
                granted = self._grant(now)
                if granted:
                    push(granted)  # the pool's lock nests inside this one, never around it
                    continue
                wake = min((self._cores[name].wake_at(now) for name, heads in
                            self._heads.items() if any(heads.values())), default=now + 1.0)
                self._cond.wait(max(0.0, wake - now))

    def _grant(self, now: float) -> list[Item]:
        out: list[Item] = []
        for name, core in self._cores.items():
            heads = self._heads[name]
            while True:
                waiting = {level: [e.cost for e in itertools.islice(queue, _LOOK_AHEAD)]
                           for level, queue in heads.items() if queue}
                granted = core.grant(waiting, now) if waiting else {}
                if not granted:
                    break
                for level, count in granted.items():
                    for _ in range(count):
                        self._pass(heads[level].popleft(), now, out)
        return out

    def _pass(self, entry: _Entry, now: float, out: list[Item]) -> None:
        """``entry`` got its tokens: wake its worker, or send it to the pool and make the
        next record of its lane a head."""
        self._wait_s[entry.resource, entry.level] += now - entry.since
        entry.since = now  # the grant's time from now on (see _started)
        if entry.event is not None:
            entry.event.set()
            return
        self._waiting[entry.resource, entry.level] -= 1
        self._granted[id(entry.record)] = (entry.record, entry.resource, entry.cost, now)
        out.append((entry.level, entry.tp, entry.group, [entry.record]))
        lane = self._lanes[entry.lane]
        lane.popleft()
        if lane:
            head = lane[0]
            self._heads[head.resource][head.level].append(head)
        else:
            del self._lanes[entry.lane]

    # -- workers ----------------------------------------------------------------------------

    def wrap(self, call: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``call`` (one attempt at a record) spending the record's tokens: the gate's grant
        for its first call, a new one for a retry; a throttle pauses and lowers the budget,
        then the call is made again (no attempt spent)."""

        def budgeted(record: Any) -> Any:
            with self._cond:
                first = self._granted.pop(id(record), None)
                if first is not None:
                    self._started(*first[1:])
            resource = self._budgets.resource_of(record)
            if first is None:
                self._acquire(record, resource)
            while True:
                try:
                    result = call(record)
                except Throttled as signal:
                    result = signal
                if not isinstance(result, Throttled):
                    with self._cond:
                        self._cores[resource].succeeded()
                    return result
                with self._cond:
                    self._cores[resource].throttle(self._clock(), result.retry_after)
                self._acquire(record, resource, result)

        return budgeted

    def _started(self, resource: str, cost: int, granted_at: float) -> None:
        """A granted call starts now: its resource's window counts it from now (the lock
        held)."""
        self._cores[resource].started(self._clock(), granted_at, cost)

    def _acquire(self, record: Any, resource: str, signal: Throttled | None = None) -> None:
        """Wait on this worker for ``record``'s tokens, first among its level's waiters; the
        call starts once they are granted."""
        level = self._level_of(record.topic)
        event = threading.Event()
        entry = _Entry(level, TopicPartition(record.topic, record.partition), None, record,
                       resource, self._budgets.cost_of(record), None, event)
        with self._cond:
            self._heads[resource][level].appendleft(entry)
            self._cond.notify()
        while not event.wait(_CLOSE_CHECK_S):
            with self._cond:
                if self._closed and not event.is_set():
                    self._heads[resource][level].remove(entry)
                    raise signal or Throttled(message="closed while waiting for a token")
        with self._cond:
            self._started(resource, entry.cost, entry.since)


class BudgetedPool(WorkerPool):
    """A :class:`WorkerPool` whose records pass a :class:`BudgetGate` first."""

    def __init__(self, weights: Mapping[int, int], shards: int, ordering: Ordering,
                 handler: RecordHandler, counters: Counters, gate: BudgetGate) -> None:
        super().__init__(weights, shards, ordering, handler, counters)
        self.gate = gate

    def push(self, items: Iterable[Item]) -> None:
        """Queue the records in the gate's lanes (the pool gets them as tokens come)."""
        self.gate.push(items, super().push)

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int:
        """Drop the records of ``partitions`` waiting in the gate and queued in the pool."""
        return self.gate.discard(partitions) + super().discard(partitions)

    def drain_s(self) -> float:
        """About how long the workers are fed without the polling thread: the gate's records
        come at their budgets' pace whatever the poll does, so while partitions are paused the
        polling thread blocks in the poll (where a higher level's record wakes it at once), not
        in a poll of timeout 0 as fast as it can (then a level-2 record waited for the next
        poll of its level, 9.4 ms p50, and the gate's thread for the GIL)."""
        return super().drain_s() + self.gate.drain_s()

    def sizes(self) -> tuple[int, int]:
        """Records waiting (for a token, queued, or in a batch) and running now."""
        queued, running = super().sizes()
        return queued + self.gate.waiting(), running

    def start(self) -> None:
        """Start the workers and the gate."""
        super().start()
        self.gate.start(super().push)

    def close(self, join_s: float = 0.5) -> None:
        """Stop the gate, then the workers."""
        self.gate.close()
        super().close(join_s)


def partition_counter(consumer: Any) -> Callable[[str], int]:
    """How many partitions a topic has, asked of ``consumer`` as the caller gave it
    (kafka-python's ``partitions_for_topic``, confluent's ``list_topics``) once per topic,
    only for topics it is assigned, so nothing is created; 0 when unknown (the level's budget
    then stays whole)."""
    known: dict[str, int] = {}

    def ask(topic: str) -> int:
        if callable(getattr(consumer, "partitions_for_topic", None)):
            return len(consumer.partitions_for_topic(topic) or ())
        if callable(getattr(consumer, "list_topics", None)):
            return len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        return 0

    def count(topic: str) -> int:
        if topic not in known:
            try:
                known[topic] = ask(topic)
            except Exception as exc:  # a closing consumer in its last revoke, a timeout
                log.warning("budgets: partitions of %r unknown (%r); its level's budget "
                            "stays whole", topic, exc)
                return 0
        return known[topic]

    return count


class BudgetShares:
    """Rebalance hooks re-dividing the budgets: after every change of the assignment each
    level's share is the partitions of that level this process holds over all partitions of
    that level's topics it holds any of (see docs/budgets.md)."""

    def __init__(self, gate: BudgetGate, level_of: Callable[[str], int],
                 partitions_of: Callable[[str], int]) -> None:
        self._gate = gate
        self._level_of = level_of
        self._partitions_of = partitions_of
        self._mine: set[TopicPartition] = set()

    def __repr__(self) -> str:
        return f"BudgetShares(partitions={len(self._mine)})"

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        self._mine -= partitions
        self._update()

    async def lost(self, partitions: set[TopicPartition]) -> None:
        await self.revoked(partitions)

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        self._mine |= partitions
        self._update()

    def shares(self) -> dict[int, float]:
        """Each level's share now (levels this process holds nothing of: 0)."""
        held: dict[int, int] = {}
        topics: dict[int, set[str]] = {}
        for tp in self._mine:
            level = self._level_of(tp.topic)
            held[level] = held.get(level, 0) + 1
            topics.setdefault(level, set()).add(tp.topic)
        shares = {}
        for level, count in held.items():
            total = sum(self._partitions_of(topic) for topic in topics[level])
            shares[level] = 1.0 if total <= 0 else min(1.0, count / total)
        return shares

    def _update(self) -> None:
        self._gate.set_shares(self.shares())


def gate_for(budgets: object, levels: Levels, ordering: Ordering,
             partitions_of: Callable[[str], int]) -> BudgetGate | None:
    """The executor's gate for ``budgets`` (None: no budgets), its shares following the
    assignment; ConfigError if ``budgets`` is no :class:`~priority_kafka.budgets.Budgets`.
    ``partitions_of``: :func:`partition_counter` of the consumer as the caller gave it."""
    if budgets is None:
        return None
    if not isinstance(budgets, Budgets):
        raise ConfigError(f"'budgets' must be a Budgets or None (got {shown(budgets)}).")
    gate = BudgetGate(budgets, levels.reserved, ordering, levels.level_of)
    gate.shares = BudgetShares(gate, levels.level_of, partitions_of)
    return gate

