"""The chaos soak's parts (:mod:`benchmarks.soak`): a workload lane with its producer and member
processes, the tail of what the members handled, the exactly-once output reader, the process
sampler, and the figures computed from them.

A lane is one client family in one mode on a priority topic of its own (3 levels x 3
partitions, 3 replicas, ``min.insync.replicas=2``): a producer of the family (``acks=all``,
idempotent; :class:`tests.faults.common.Producing`, values ``level:key:seq``) and member
processes (``benchmarks/executor_child.py --timestamps``, each writing ``value time`` per record
handled). Member 0 of each lane is never killed: the long-lived process watched for leaks.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks import executor_child as child
from benchmarks._code import family
from benchmarks._common import create_topics
from benchmarks._group_configs import set_group_configs
from benchmarks._traffic import LEVELS, Producing, Tally
from benchmarks.churn import Member
from benchmarks.churn import member_options as churn_member_options
from priority_kafka import create_priority_topics
from priority_kafka.naming import level_group_id

PARTITIONS = 3
KEYS = 20
#: Lines handled less than this long ago wait before they are checked: a member that wrote
#: later may have been read first, and per-key order is judged in handling-time order.
HOLD_S = 2.0
#: The executor's crash bound per partition (docs/reliability.md, "How the figures are
#: counted"): what was received and not covered by the last commit, at most
#: ``max_in_flight_per_partition`` + one poll.
REPLAY_PER_PARTITION = child.MAX_IN_FLIGHT + child.MAX_POLL_RECORDS


@attrs.frozen
class LaneSpec:
    """A lane: ``client`` family, ``mode`` at-least-once, exactly-once or share."""

    name: str
    client: str
    mode: str


LANES = {spec.name: spec for spec in (
    LaneSpec("kafka-python", "kafka-python", "at-least-once"),
    LaneSpec("confluent", "confluent", "at-least-once"),
    LaneSpec("kafka-python-eos", "kafka-python", "exactly-once"),
    LaneSpec("confluent-eos", "confluent", "exactly-once"),
    LaneSpec("share", "confluent", "share"),
)}


class Lane:
    """One lane on the cluster at ``servers``: topics, producer, members, and the checks of
    what they handled (fed by :meth:`tail`)."""

    def __init__(self, spec: LaneSpec, servers: str, prefix: str, rate: float, workdir: Path,
                 slow_flag: Path) -> None:
        self.spec, self.servers, self.rate = spec, servers, rate
        self.workdir = workdir / spec.name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topic, self.group = f"{prefix}-{spec.name}", f"{prefix}-{spec.name}-g"
        self.topics = create_priority_topics(servers, self.topic, LEVELS, PARTITIONS,
                                             replication_factor=3, min_insync_replicas=2)
        self.partitions = {topic: PARTITIONS for topic in self.topics}
        self.output: str | None = None
        options = ["--slow-flag", str(slow_flag), "--slow-ms", str(SLOW_HANDLER_MS)]
        if spec.mode == "share":
            set_group_configs(servers, [level_group_id(self.group, lv) for lv in range(LEVELS)],
                              {"share.auto.offset.reset": "earliest"})
            options += ["--client", "confluent", "--share"]
        else:
            # Both families' default assignors are eager.
            options += churn_member_options(spec.client, "classic-eager")
        if spec.mode == "exactly-once":
            self.output = f"{self.topic}-out"
            create_topics(servers, [self.output], PARTITIONS)
            options += ["--exactly-once", self.output]
        self.options = options
        self.members: list[Member] = []
        self.instance_of: dict[int, str] = {}
        #: Members that a fault killed, or that ended by themselves (replaced either way).
        self.killed: set[int] = set()
        self.tally = Tally()
        # confluent's Producing sets acks=all itself.
        configs: dict[str, Any] = {} if family(spec.client).librdkafka else {"acks": "all"}
        self.producing = Producing(servers, self.topic, self.tally, rate, keys=KEYS,
                                   client=spec.client, **configs)
        self._offsets: dict[int, int] = {}
        self._pending: list[tuple[float, str, int]] = []
        self._highest: dict[tuple[str, str], tuple[int, str]] = {}
        #: Per-key order breaks: (time, value, the higher value of its key handled before).
        self.order_breaks: list[tuple[float, str, str]] = []
        #: Every handling beyond a record's first: (time, value, member).
        self.duplicates: list[tuple[float, str, int]] = []
        self.first_member: dict[str, int] = {}
        self.first_at: dict[str, float] = {}
        #: Per level, first handlings per whole second of the soak clock.
        self.per_second: dict[int, Counter[int]] = defaultdict(Counter)
        self.reader = OutputReader(servers, self.output) if self.output else None

    def start_member(self, replacing: Member | None = None) -> Member:
        """Start a member, in place of ``replacing`` if given: an exactly-once member takes
        over its instance id, so its transactional id fences the killed process's producer
        and aborts its open transaction."""
        number = len(self.members)
        if replacing is not None:
            self.instance_of[number] = self.instance_of.get(replacing.number, "")
        elif self.spec.mode == "exactly-once":
            self.instance_of[number] = f"m{number}"
        # A replacement that dies starting (a fault under way) is the supervisor's next find.
        member = Member(number, self.servers, self.topic, self.group, self.options,
                        self.workdir, instance_id=self.instance_of.get(number, ""),
                        must_start=replacing is None)
        self.members.append(member)
        return member

    def churnable(self) -> list[Member]:
        """The members a fault may kill: alive, and not member 0 (kept for the leak watch)."""
        return [m for m in self.members[1:] if m.alive()]

    def tail(self, t0: float, hold_s: float = HOLD_S) -> None:
        """Read what the members handled since the last call; check lines older than
        ``hold_s`` in time order (``t0``: the soak clock's zero, wall time)."""
        for member in self.members:
            with contextlib.suppress(FileNotFoundError), member.handled.open("rb") as file:
                file.seek(self._offsets.get(member.number, 0))
                data = file.read()
                complete = data[:data.rfind(b"\n") + 1]
                self._offsets[member.number] = self._offsets.get(member.number, 0) + len(complete)
                for line in complete.decode().splitlines():
                    value, stamp = line.split()
                    heapq.heappush(self._pending, (float(stamp), value, member.number))
        until = time.time() - hold_s
        wall_to_monotonic = time.monotonic() - time.time()
        while self._pending and self._pending[0][0] <= until:
            at, value, number = heapq.heappop(self._pending)
            self._check(at, value, number, t0)
            self.tally.handle(value, self.tally.acked_partition.get(value, -1),
                              at=at + wall_to_monotonic)
        if self.reader is not None:
            self.reader.read()

    def _check(self, at: float, value: str, number: int, t0: float) -> None:
        if value in self.first_member:
            self.duplicates.append((at, value, number))
            return
        self.first_member[value] = number
        self.first_at[value] = at
        level, key, seq = value.split(":")
        self.per_second[int(level)][int(at - t0)] += 1
        if self.spec.mode == "share":
            return  # a share group keeps no order
        highest = self._highest.get((level, key))
        if highest is not None and int(seq) < highest[0]:
            self.order_breaks.append((at, value, highest[1]))
        else:
            self._highest[(level, key)] = (int(seq), value)

    def drained(self) -> bool:
        """Every acknowledged record handled (and, exactly-once, committed to the output)."""
        with self.tally.lock:
            done = self.tally.acked <= self.first_member.keys()
        return done and (self.reader is None or self.reader.has(self.tally.acked))

    def stop(self, timeout_s: float = 60.0) -> list[int | str]:
        """SIGTERM every live member at once (a graceful stop); one still running after
        ``timeout_s`` has its threads' stacks written to its log (SIGUSR1) and is SIGKILLed.
        Their exit codes, or what went wrong."""
        alive = [member for member in self.members if member.alive()]
        for member in alive:
            member.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        codes: list[int | str] = []
        for member in alive:
            try:
                codes.append(member.process.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                member.process.send_signal(signal.SIGUSR1)
                time.sleep(1.0)
                member.process.kill()
                member.process.wait(10)
                codes.append(f"{self.spec.name} member {member.number} ignored SIGTERM for "
                             f"{timeout_s:g} s (its stacks: {member.log})")
        return codes


SLOW_HANDLER_MS = 25.0
#: An output reader that read nothing for this long is replaced (see OutputReader.read).
READER_RENEW_S = 30.0


class OutputReader:
    """Reads an exactly-once lane's output topic ``read_committed`` from its start (assigned,
    no group): counts every value, and per key the order of the outputs."""

    def __init__(self, servers: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING

        self._servers, self._topic = servers, topic
        #: Where the reader goes on in each partition (after the last output read).
        self._next = dict.fromkeys(range(PARTITIONS), OFFSET_BEGINNING)
        #: Consumers replaced after reading nothing for READER_RENEW_S (see read()).
        self.renewals = 0
        self._read_at = time.monotonic()
        self._consumer = self._open()
        self.counts: Counter[str] = Counter()
        # Outputs per input record (its topic:partition:offset, from the child's header):
        # more than one is exactly-once broken; one value from two input records is the
        # input log holding it twice.
        self.per_source: Counter[bytes] = Counter()
        self.sources: dict[str, set[bytes]] = {}
        self.order_breaks: list[tuple[str, str]] = []
        self._highest: dict[tuple[str, str], tuple[int, str]] = {}
        self._lock = threading.Lock()

    def _open(self) -> Any:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({
            "bootstrap.servers": self._servers, "group.id": f"{self._topic}-reader",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "log_level": 4,  # not librdkafka's notice of every connection a fault closes
        })
        consumer.assign([TopicPartition(self._topic, p, offset)
                         for p, offset in self._next.items()])
        return consumer

    def read(self, budget_s: float = 0.5) -> None:
        """Take what was committed since the last call (for up to ``budget_s``).

        A reader that read nothing for READER_RENEW_S is replaced by a new one going on from
        the same offsets: the hour soaks' confluent reader stopped reading for good after a
        fault (14,957 outputs read of the 144,116 the log held, every partition's last stable
        offset at its end), which the report took for outputs missing."""
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline:
            messages = self._consumer.consume(1000, 0.1)
            if not messages:
                if time.monotonic() - self._read_at > READER_RENEW_S:
                    self._renew()
                return
            self._read_at = time.monotonic()
            with self._lock:
                for message in messages:
                    if message.error() is not None:
                        continue  # partition EOF and transient errors: read on
                    self._next[message.partition()] = message.offset() + 1
                    value = (message.value() or b"").decode()
                    self.counts[value] += 1
                    source = dict(message.headers() or ()).get("source", b"")
                    self.per_source[source] += 1
                    self.sources.setdefault(value, set()).add(source)
                    if self.counts[value] > 1:
                        continue
                    level, key, seq = value.split(":")
                    highest = self._highest.get((level, key))
                    if highest is not None and int(seq) < highest[0]:
                        self.order_breaks.append((value, highest[1]))
                    else:
                        self._highest[(level, key)] = (int(seq), value)

    def has(self, values: Iterable[str]) -> bool:
        with self._lock:
            return all(value in self.counts for value in values)

    def figures(self, acked: set[str]) -> dict[str, Any]:
        with self._lock:
            missing = sorted(acked - self.counts.keys())
            return {
                "outputs": sum(self.counts.values()),
                "missing": len(missing), "missing_examples": missing[:20],
                # Outputs beyond one per input record: what exactly-once forbids.
                "duplicated": sum(c - 1 for c in self.per_source.values()),
                "duplicated_examples": [
                    s.decode() for s, c in self.per_source.items() if c > 1][:20],
                # Values read from two input records (the input log held them twice: not
                # the executor's doing), each output once.
                "input_duplicates": [v for v, s in self.sources.items() if len(s) > 1][:20],
                "order_breaks": len(self.order_breaks),
                "reader_renewals": self.renewals,
                "order_break_examples": self.order_breaks[:20],
            }

    def _renew(self) -> None:
        stuck, self._consumer = self._consumer, self._open()
        self.renewals += 1
        self._read_at = time.monotonic()
        # A stuck client's close may block: off this thread, and not waited for.
        threading.Thread(target=stuck.close, name="close stuck reader", daemon=True).start()

    def close(self) -> None:
        self._consumer.close()


class Sampler:
    """Samples every registered process's RSS, threads and open file descriptors (psutil)
    every ``interval_s`` on a thread."""

    def __init__(self, interval_s: float) -> None:
        import psutil

        self._psutil = psutil
        self._interval_s = interval_s
        self._processes: dict[str, Any] = {}
        self.samples: dict[str, list[tuple[float, float, int, int]]] = defaultdict(list)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def watch(self, label: str, pid: int | None) -> None:
        if pid is None:
            return
        with self._lock, contextlib.suppress(self._psutil.NoSuchProcess):
            self._processes[label] = self._psutil.Process(pid)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            with self._lock:
                processes = list(self._processes.items())
            for label, process in processes:
                try:
                    with process.oneshot():
                        row = (time.time(), process.memory_info().rss / 2**20,
                               process.num_threads(), process.num_fds())
                    # A process exiting reads as 0 MB and 0 fds before it is gone (seen at a
                    # run's end: confluent/member-0 "58 -> 0 MB", failing the smoke).
                    exiting = row[1] == 0 and row[3] == 0
                except (self._psutil.NoSuchProcess, self._psutil.ZombieProcess):
                    exiting = True
                if exiting:
                    with self._lock:
                        self._processes.pop(label, None)
                    continue
                self.samples[label].append(row)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


#: What the leak check tolerates over a long-lived process's life after its warm-up (the
#: least-squares line's rise): RSS in MB (or 10 % of its start), threads, file descriptors.
LEAK_RISE = {"rss_mb": 16.0, "threads": 1.5, "fds": 4.0}
#: The first part of a process's life is its warm-up (imports, caches, connections), not a leak.
WARM_UP_SHARE = 0.2
#: A leak is judged over 10 minutes at least: over a smoke's two, a broker restarted adds a few
#: librdkafka threads and connections that stay, which is no leak.
LEAK_MIN_S = 600.0


def resources(samples: Sequence[tuple[float, float, int, int]], run_s: float) -> dict[str, Any]:
    """Start, end and least-squares slope (per hour, after the warm-up) of RSS, threads and
    fds; ``leak``: a metric whose fitted line rose more than :data:`LEAK_RISE` over the life
    after the warm-up (judged only for a process sampled over 80 % of the sampling's span
    ``run_s``, ``long_lived``, and for :data:`LEAK_MIN_S` at least)."""
    import numpy as np

    span = samples[-1][0] - samples[0][0] if samples else 0.0
    figures: dict[str, Any] = {"samples": len(samples), "life_s": round(span, 1),
                               "long_lived": span >= 0.8 * run_s and len(samples) >= 5}
    if not samples:
        return figures
    settled = [row for row in samples if row[0] >= samples[0][0] + WARM_UP_SHARE * span]
    times = np.array([row[0] for row in settled]) - settled[0][0]
    leaks = []
    for index, name in enumerate(("rss_mb", "threads", "fds"), start=1):
        values = np.array([row[index] for row in settled], dtype=float)
        slope = float(np.polyfit(times, values, 1)[0]) if len(settled) >= 3 else 0.0
        rise = slope * (times[-1] if len(times) else 0.0)
        allowed = LEAK_RISE[name] if name != "rss_mb" else max(LEAK_RISE[name], 0.1 * values[0])
        # A leak keeps rising: the fitted line, and the last third's median over the first's
        # (a dip after the warm-up tilts the line alone).
        third = max(1, len(values) // 3)
        growth = float(np.median(values[-third:]) - np.median(values[:third]))
        if figures["long_lived"] and span >= LEAK_MIN_S and rise > allowed and growth > allowed:
            leaks.append(name)
        figures[name] = {"start": samples[0][index], "end": samples[-1][index],
                         "max": max(row[index] for row in samples),
                         "slope_per_h": round(slope * 3600, 3), "fitted_rise": round(rise, 2),
                         "thirds_growth": round(growth, 2)}
    figures["leak"] = leaks
    return figures


def longest_stall_outside(
    tally: Tally, level: int, windows: Sequence[tuple[float, float]], since: float,
) -> dict[str, float]:
    """The longest time (monotonic ``from``/``to``, after ``since``) in which records of
    ``level`` were acknowledged and waiting but none was handled, outside every fault
    ``window``: the earliest-sent unhandled record is tracked along the handlings."""
    prefix = f"{level}:"
    with tally.lock:
        records = [(tally.sent[v], tally.first_handled.get(v, float("inf")))
                   for v in tally.acked if v.startswith(prefix) and v in tally.sent]
    handlings = sorted(done for _, done in records if done != float("inf") and done > since)
    waiting = sorted(records)
    worst = {"stall_s": 0.0, "from": since, "to": since}
    cursor = 0
    for previous, current in itertools.pairwise(handlings):
        # Handled records stay handled: the cursor only moves on, to the earliest-sent record
        # not handled by ``previous``.
        while cursor < len(waiting) and waiting[cursor][1] <= previous:
            cursor += 1
        if cursor == len(waiting) or waiting[cursor][0] >= current:
            continue
        earliest = waiting[cursor][0]
        for start, end in _outside(max(previous, earliest), current, windows):
            if end - start > worst["stall_s"]:
                worst = {"stall_s": end - start, "from": start, "to": end}
    return worst


def _outside(start: float, end: float, windows: Sequence[tuple[float, float]]
             ) -> list[tuple[float, float]]:
    """The pieces of [start, end] outside every window."""
    pieces = [(start, end)]
    for w_start, w_end in windows:
        pieces = [piece for a, b in pieces for piece in ((a, min(b, w_start)), (max(a, w_end), b))
                  if piece[1] > piece[0]]
    return pieces

