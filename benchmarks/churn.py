"""Churn: executor processes killed and started at random under steady traffic, per client
family and group protocol; nothing may be lost and no level may stall.

A 3-level priority topic (3 partitions per level) gets a steady keyed producer (``--rate``
records/s, values ``level:key:seq``). Three member processes (``benchmarks/executor_child.py``: a
``ShardedExecutor`` over a ``PriorityConsumer``, dynamic membership, ``session_timeout_ms``
6 s) share one group. For ``--minutes``, at seeded random intervals (``--seed``, 2-8 s), a
member is killed (SIGTERM and SIGKILL alternating) or one is started, keeping 1-3 alive; a
member is killed only while another has been alive for 8 s. Then the producer stops, the
survivors drain, and the members' handled logs and stderr (kept in
``<out>/churn-<client>-<protocol>/run-<n>/``) are checked.

The members run on ``--client`` kafka-python (the default client) or confluent (the executor
over ``priority_kafka.confluent.PriorityConsumer``), with ``--protocol`` ``classic-eager``
(kafka-python's range assignor, librdkafka's ``range``), ``classic-cooperative``
(cooperative-sticky) or ``consumer`` (KIP-848, confluent only: the broker assigns; the churn
sets each level group's ``consumer.session.timeout.ms`` to the same 6 s, and the broker paces
heartbeats, 0.5 s on the local broker). Every run uses the same ``--seed``; each run is a fresh
process and the sides take turns (:func:`benchmarks._common.interleave`, ``--rounds``).

* ``lost``: acknowledged records never handled (must be 0);
* ``duplicates``: handlings beyond the first, each put on the membership change (kill or
  start) that preceded it; ``duplicates_per_change`` divides by the changes of the churn;
* ``commit_errors``: the executor's ``commit of ... failed`` warnings other than the broker
  refusing a periodic commit because the group is rebalancing (:data:`REFUSALS`: the group is
  rebalancing, or the commit carries the member's previous generation, or under the consumer
  protocol its previous epoch, ``STALE_MEMBER_EPOCH``; counted as
  ``commit_refusals_rebalancing``, by error in ``commit_refusals_by_error``, each retried by
  the next commit); ``commit_errors_revoked`` those of either kind naming a partition the
  member no longer owned (per its listener calls; must be 0);
* ``longest_level_stall_s``: per level, the longest time without any record of the level
  handled while records of it were waiting (acknowledged and not yet handled); must stay
  within the watchdog bound, ``max(session_timeout_ms, 10 s)`` = 10 s (members use the
  broker's minimum session timeout, 6 s: a SIGKILLed member holds its partitions, and under
  eager the group's next rebalance, until its session expires, then a join round follows);
* ``longest_level_stall_under_traffic_s``: the same until the producer stopped (in the drain
  a SIGKILLed member's partitions, held for its session, stall their level whenever the
  survivors have nothing else of it left);
* ``join_to_full_s``: per member started during the churn, the seconds from its start
  (subscribed) until every partition of every level is owned by a live member and the new
  member owns partitions of every level (per the listener calls; a SIGKILLed member owns
  nothing from its kill); ``None`` when another membership change came first;
* ``longest_rejoin_wait``: the longest time a member's level waited from a revoke of some of
  its partitions to its next assignment (the evidence when a level stalls in an eager
  rebalance; under cooperative a revoke need not be followed by an assignment);
* ``syncs_never_applied``: successful SyncGroup answers carrying partitions after which the
  member sent a new JoinGroup instead of applying them (from kafka-python's coordinator log).

    .venv/bin/python -m benchmarks.churn [--smoke] [--minutes M] [--rounds N]
        [--client kafka-python|confluent|both]
        [--protocol classic-eager|classic-cooperative|consumer|all] [--rate R] [--seed S]
        [--librdkafka-debug CONTEXTS]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import executor_child as child
from benchmarks._clients import add_client_argument, check_client, clients_of
from benchmarks._code import family
from benchmarks._common import Contender, broker, interleave, parse_args, unique, write_result
from priority_kafka import PriorityProducer, create_priority_topics
from priority_kafka.naming import level_group_id

NAME = "churn"
LEVELS = 3
PARTITIONS = 3
KEYS = 30
MEMBERS = 3
#: Seconds between two churn actions, drawn uniformly.
INTERVAL_S = (2.0, 8.0)
#: A member is killed only while another one has been alive this long (it has joined).
SETTLED_S = 8.0
#: The members' session timeout: the broker's minimum. A SIGKILLed member keeps its
#: partitions, and under eager rebalancing holds up the whole group's next rebalance, until the
#: broker expires its session; a join round comes on top. So a level's stall after a SIGKILL is
#: at least the session timeout, for any Kafka consumer: with 6 s it fits the watchdog bound.
SESSION_TIMEOUT_MS = 6000
WATCHDOG_BOUND_S = max(SESSION_TIMEOUT_MS / 1000, 10.0)
CHILD = Path(child.__file__)
#: The group protocols, named as in benchmarks/group_protocol.py: the classic protocol with an
#: eager or a cooperative assignor, and the consumer protocol (KIP-848; kafka-python has none).
PROTOCOLS = ("classic-eager", "classic-cooperative", "consumer")
_PROTOCOL_OPTIONS = {
    "classic-eager": ("--strategy", "eager"),
    "classic-cooperative": ("--strategy", "cooperative"),
    "consumer": ("--group-protocol", "consumer"),
}
#: Commit errors that are the broker refusing a commit while the group rebalances (the next
#: commit carries the same offsets), by kafka-python's and librdkafka's names: the group is
#: rebalancing, or the commit carries the member's previous generation (classic) or epoch
#: (the consumer protocol).
REFUSALS = frozenset({
    "RebalanceInProgressError", "REBALANCE_IN_PROGRESS", "IllegalGenerationError",
    "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH",
})
# The executor's warning: kafka-python's error by class, librdkafka's by KafkaError code.
_COMMIT_FAILED = re.compile(
    r"^(\d+\.\d+) WARNING \S+ commit of \{(.*)\} failed: "
    r"(?:KafkaException\(KafkaError\{code=)?(\w+)"
)
_PARTITION = re.compile(r"TopicPartition\(topic='([^']+)', partition=(\d+)\)")
# kafka-python's coordinator debug log: a SyncGroup answer carrying partitions of a level, its
# application, and a new JoinGroup of the level's group.
_SYNCED = re.compile(r"Received SyncGroup response: .*error_code=0, .*?assignment=b'.*?-(\d)\\x")
_APPLIED = re.compile(
    r"(?:Setting newly assigned partitions .* for|Cooperative rebalance complete for)"
    r" group \S+-(\d)"
)
_REJOINING = re.compile(r"\(Re-\)joining group \S+-(\d)$")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=3.0, help="churn per run")
    add_client_argument(parser)
    parser.add_argument(
        "--protocol", choices=(*PROTOCOLS, "all"), default="all",
        help="group protocol (consumer: KIP-848, confluent only); all: each the client has",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs per side, taking turns")
    parser.add_argument("--rate", type=float, default=300.0, help="records/s produced")
    parser.add_argument("--seed", type=int, default=1, help="of the churn's random actions")
    parser.add_argument("--librdkafka-debug", metavar="CONTEXTS",
                        help="confluent members' librdkafka debug contexts (cgrp...), logged")


def member_options(client: str, protocol: str, debug: str | None = None) -> list[str]:
    """benchmarks/executor_child.py's options for a member on ``client`` joining with ``protocol``
    (:data:`PROTOCOLS`), logging librdkafka's ``debug`` contexts if given."""
    check_client(client)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; one of {PROTOCOLS}")
    if not family(client).consumer_protocol and (protocol == "consumer" or debug):
        raise ValueError(f"{client} has no consumer protocol and no librdkafka debug")
    options = list(_PROTOCOL_OPTIONS[protocol])
    if protocol != "consumer":  # the consumer protocol's is the group's: _group_sessions
        options += ["--session-timeout-ms", str(SESSION_TIMEOUT_MS)]
    options += ["--client", client]
    if debug:
        options += ["--debug", debug]
    return options


def _group_sessions(bootstrap_servers: str, group: str) -> None:
    """Give each level's group the classic members' session timeout: under the consumer
    protocol it is the group's ``consumer.session.timeout.ms``, which the broker bounds by
    ``group.consumer.min.session.timeout.ms`` (the local broker's: 6 s; Kafka's: 45 s)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry("consumer.session.timeout.ms", str(SESSION_TIMEOUT_MS),
                        incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    resources = [ConfigResource(ResourceType.GROUP, level_group_id(group, level),
                                incremental_configs=[entry]) for level in range(LEVELS)]
    for future in admin.incremental_alter_configs(resources).values():
        try:
            future.result(30)
        except KafkaException as exc:
            raise RuntimeError(
                f"the broker refused consumer.session.timeout.ms={SESSION_TIMEOUT_MS} ({exc}); "
                f"its group.consumer.min.session.timeout.ms must allow it"
            ) from exc


class _Producing:
    """Sends ``level:key:seq`` records at ``rate`` per second on a thread; notes ack times."""

    def __init__(self, bootstrap_servers: str, topic: str, rate: float) -> None:
        self._producer = PriorityProducer(
            max_priority=LEVELS, bootstrap_servers=bootstrap_servers, linger_ms=5
        )
        self._topic, self._rate = topic, rate
        self.acked: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq: Counter[tuple[int, int]] = Counter()
        start = time.monotonic()
        for i in itertools.count():
            level, key = i % LEVELS, (i // LEVELS) % KEYS
            value = f"{level}:{key}:{seq[level, key]}"
            seq[level, key] += 1
            future = self._producer.send(
                self._topic, key=str(key).encode(), value=value.encode(), priority=level
            )
            future.add_callback(lambda _, value=value: self.acked.__setitem__(value, time.time()))
            future.add_errback(lambda exc, value=value: self.failed.__setitem__(value, repr(exc)))
            if self._stop.wait(max(0.0, start + (i + 1) / self._rate - time.monotonic())):
                return

    def stop(self) -> None:
        """Stop sending and wait for every acknowledgement; again, it does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(60)
        self._producer.close()


class Member:
    """One benchmarks/executor_child.py process with its handled log and stderr log; an empty
    ``instance_id`` is dynamic membership (the soak's exactly-once members give one: it is
    their transactional id too)."""

    def __init__(
        self, number: int, bootstrap_servers: str, topic: str, group: str,
        options: Sequence[str], workdir: Path, instance_id: str = "", must_start: bool = True,
    ) -> None:
        """``must_start=False``: a member that ended before it was ready is left ended, for a
        supervisor to notice (the soak), instead of raising RuntimeError."""
        self.number = number
        self.handled = workdir / f"member-{number}.handled"
        self.log = workdir / f"member-{number}.log"
        self.started = time.monotonic()
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD), bootstrap_servers, topic, group, str(self.handled),
                 instance_id, str(LEVELS), "--timestamps", *options],
                stdout=subprocess.PIPE, stderr=log, text=True,
                # After the path a --code contender was given, if any: its priority_kafka.
                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    filter(None, [os.environ.get("PYTHONPATH"), str(CHILD.parent.parent)]))},
            )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready" and must_start:
            raise RuntimeError(f"member {number} did not start: {self.log.read_text()[-2000:]}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, signum: int, timeout_s: float = 60.0) -> int:
        """Send ``signum`` and wait for the process to end; its exit code."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            name = signal.Signals(signum).name
            raise RuntimeError(f"member {self.number} ignored {name}") from None


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s:g} s")
        time.sleep(0.2)


def _handled(members: Sequence[Member]) -> list[tuple[float, str, int]]:
    """Every handling: (time, value, member), in time order."""
    rows = []
    for member in members:
        if member.handled.exists():
            for line in member.handled.read_text().splitlines():
                value, at = line.split()
                rows.append((float(at), value, member.number))
    rows.sort()
    return rows


def _handled_values(members: Sequence[Member]) -> set[str]:
    return {line.split()[0] for m in members if m.handled.exists()
            for line in m.handled.read_text().splitlines()}


def _event(line: str) -> tuple[float, str, set[tuple[int, int]]] | None:
    """A listener call in a member's log: (time, assigned|revoked|lost, {(level, partition)})."""
    parts = line.split()
    if len(parts) < 3 or parts[1] != "EVENT":
        return None
    return float(parts[0]), parts[2], {
        (int(t.rsplit("-", 1)[1]), int(p)) for t, p in (item.rsplit(":", 1) for item in parts[3:])
    }


def _commit_failures(member: Member) -> list[dict[str, Any]]:
    """The member's commit failures, each with the partitions it named that it did not own."""
    owned: set[tuple[int, int]] = set()
    failures = []
    for line in member.log.read_text().splitlines():
        if (event := _event(line)) is not None:
            _, kind, named = event
            owned = owned | named if kind == "assigned" else owned - named
            continue
        match = _COMMIT_FAILED.match(line)
        if match:
            at, offsets, error = match.groups()
            named = {(int(t.rsplit("-", 1)[1]), int(p)) for t, p in _PARTITION.findall(offsets)}
            failures.append({
                "at": float(at), "member": member.number, "error": error,
                "not_owned": sorted(named - owned),
            })
    return failures


def _dropped_syncs(member: Member) -> tuple[int, int]:
    """(successful SyncGroup answers carrying partitions, those never applied): the member's
    next step in that level's group was a new JoinGroup (kafka-python 3.0.12 drops a join
    task that completed between two polls)."""
    waiting: set[str] = set()
    synced = dropped = 0
    for line in member.log.read_text().splitlines():
        if match := _SYNCED.search(line):
            waiting.add(match.group(1))
            synced += 1
        elif match := _APPLIED.search(line):
            waiting.discard(match.group(1))
        elif (match := _REJOINING.search(line)) and match.group(1) in waiting:
            waiting.discard(match.group(1))
            dropped += 1
    return synced, dropped


def _rejoin_waits(member: Member) -> list[dict[str, Any]]:
    """Per level, the member's waits from a revoke of partitions to its next assignment."""
    revoked_at: dict[int, float] = {}
    waits = []
    for line in member.log.read_text().splitlines():
        if (event := _event(line)) is None:
            continue
        at, kind, partitions = event
        for level in {level for level, _ in partitions}:
            if kind == "assigned" and level in revoked_at:
                waits.append({"member": member.number, "level": level, "from": revoked_at[level],
                              "wait_s": at - revoked_at.pop(level)})
            elif kind != "assigned":
                revoked_at.setdefault(level, at)
    return waits


def _join_to_full(
    members: Sequence[Member], changes: Sequence[dict[str, Any]]
) -> list[float | None]:
    """Per start in ``changes``, the seconds until the group was fully assigned with the new
    member in it (module docstring, ``join_to_full_s``); None if another change came first."""
    timeline: list[tuple[float, int, str, set[tuple[int, int]]]] = []
    for member in members:
        for line in member.log.read_text().splitlines():
            if (event := _event(line)) is not None:
                timeline.append((event[0], member.number, event[1], event[2]))
    for change in changes:
        if change["action"] != "start":  # a SIGKILLed member's partitions wait, unhandled
            gone = change["at"] if change["action"] == "SIGKILL" else change["ended"]
            timeline.append((gone, change["member"], "gone", set()))
    timeline.sort(key=lambda event: event[0])
    every = {(level, p) for level in range(LEVELS) for p in range(PARTITIONS)}
    owned: dict[int, set[tuple[int, int]]] = {}
    full_with: list[tuple[float, set[int]]] = []  # after each event: members owning every level
    for at, number, kind, partitions in timeline:
        mine = owned.setdefault(number, set())
        if kind == "assigned":
            mine |= partitions
        elif kind == "gone":
            del owned[number]
        else:
            mine -= partitions
        holders = [tp for parts in owned.values() for tp in parts]
        complete = len(holders) == len(every) and set(holders) == every
        full_with.append((at, {m for m, parts in owned.items()
                               if complete and len({level for level, _ in parts}) == LEVELS}))
    waits: list[float | None] = []
    for i, change in enumerate(changes):
        if change["action"] != "start":
            continue
        until = changes[i + 1]["at"] if i + 1 < len(changes) else float("inf")
        reached = next((at for at, members_ in full_with
                        if at >= change["at"] and change["member"] in members_), None)
        waits.append(None if reached is None or reached > until else reached - change["at"])
    return waits


def _level_stalls(
    rows: Sequence[tuple[float, str, int]], acked: dict[str, float], until: float = float("inf")
) -> dict[int, dict[str, float]]:
    """Per level, the longest time without a handling while records of it were waiting, up
    to ``until`` (a stall still on then counts up to it)."""
    stalls = {}
    for level in range(LEVELS):
        prefix = f"{level}:"
        times = [at for at, value, _ in rows if value.startswith(prefix)]
        acks = sorted(t for v, t in acked.items() if v.startswith(prefix))
        first: set[str] = set()
        handled_by: list[int] = []  # distinct records handled up to each handling
        for _, value, _ in (row for row in rows if row[1].startswith(prefix)):
            first.add(value)
            handled_by.append(len(first))
        worst = {"stall_s": 0.0, "from": 0.0, "to": 0.0}
        for i, (a, b) in enumerate(itertools.pairwise(times)):
            waiting = handled_by[i]
            if waiting >= len(acks):
                continue
            since = max(a, acks[waiting])  # the first moment a record was waiting
            to = min(b, until)
            if to - since > worst["stall_s"]:
                worst = {"stall_s": to - since, "from": since, "to": to}
        stalls[level] = worst
    return stalls


def run_churn(
    bootstrap_servers: str, protocol: str, seconds: float, rate: float, seed: int,
    workdir: Path, client: str = "kafka-python", debug: str | None = None,
) -> dict[str, Any]:
    """One churn run of ``seconds``, members on ``client`` joining with ``protocol``
    (:data:`PROTOCOLS`); the figures and checks of the module docstring."""
    options = member_options(client, protocol, debug)
    rng = random.Random(seed)
    topic, group = unique("churn"), unique("churn-g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=PARTITIONS)
    if protocol == "consumer":
        _group_sessions(bootstrap_servers, group)
    members: list[Member] = []
    changes: list[dict[str, Any]] = []

    def start() -> None:
        members.append(Member(len(members), bootstrap_servers, topic, group, options, workdir))
        changes.append({"at": time.time(), "action": "start", "member": len(members) - 1})

    producing = _Producing(bootstrap_servers, topic, rate)
    kills = itertools.cycle((signal.SIGTERM, signal.SIGKILL))
    exit_codes: list[int] = []
    try:
        for _ in range(MEMBERS):
            start()
        _wait(lambda: len({v.split(":")[0] for v in _handled_values(members)}) == LEVELS, 90,
              "every level handled")
        # Until a member has been alive SETTLED_S nothing can happen (all are alive, none may
        # be killed): the churn, and its draws, start then, so a seed meets the same group
        # however fast the members started.
        _wait(lambda: time.monotonic() - members[0].started >= SETTLED_S, SETTLED_S + 5,
              "the first member to settle")
        churn_from = time.monotonic()
        initial_changes = len(changes)
        while time.monotonic() < churn_from + seconds:
            time.sleep(rng.uniform(*INTERVAL_S))
            alive = [m for m in members if m.alive()]
            settled = [m for m in alive if time.monotonic() - m.started >= SETTLED_S]
            kill = len(alive) == MEMBERS or (len(alive) > 1 and rng.random() < 0.5)
            if kill and settled:
                victim = rng.choice(alive)
                if not [m for m in settled if m is not victim]:
                    continue  # nobody else has joined yet: killing now would empty the group
                signum = next(kills)
                change = {"at": time.time(), "action": signal.Signals(signum).name,
                          "member": victim.number}
                changes.append(change)
                exit_codes.append(victim.stop(signum))
                change["ended"] = time.time()
            elif len(alive) < MEMBERS:
                start()
        churned_s = time.monotonic() - churn_from
        traffic_end = time.time()
        producing.stop()
        acked = dict(producing.acked)
        drained = True
        try:
            _wait(lambda: set(acked) <= _handled_values(members), 120, "the survivors to drain")
        except TimeoutError:
            drained = False
    finally:
        producing.stop()
        for member in members:
            if member.alive():
                exit_codes.append(member.stop(signal.SIGTERM))
    rows = _handled(members)
    counts = Counter(value for _, value, _ in rows)
    seen: set[str] = set()
    for change in changes:
        change["duplicates"] = 0
    change_times = [c["at"] for c in changes]
    for at, value, _ in rows:
        if value in seen:
            changes[max(0, bisect.bisect_right(change_times, at) - 1)]["duplicates"] += 1
        seen.add(value)
    failures = [f for m in members for f in _commit_failures(m)]
    refusals = [f for f in failures if f["error"] in REFUSALS]
    errors = [f for f in failures if f["error"] not in REFUSALS]
    revoked = [f for f in failures if f["not_owned"]]
    stalls = _level_stalls(rows, acked)
    # While traffic flowed: in the drain, a SIGKILLed member's partitions, held for its session,
    # stall their level whenever the survivors have nothing else of it left to handle.
    traffic = _level_stalls(rows, acked, until=traffic_end)
    level, longest = max(stalls.items(), key=lambda item: item[1]["stall_s"])
    before = [c for c in changes if c["at"] <= longest["from"]]
    joins = _join_to_full(members, changes)[MEMBERS:]  # the churn's starts
    reached = [wait for wait in joins if wait is not None]
    waits = [w for m in members for w in _rejoin_waits(m)]
    syncs = [_dropped_syncs(m) for m in members]
    longest_wait = max(waits, key=lambda w: w["wait_s"], default={"wait_s": 0.0})
    logs = [line for m in members for line in m.log.read_text().splitlines()]
    churn_changes = len(changes) - initial_changes
    duplicates = sum(counts.values()) - len(counts)
    result = {
        "client": client,
        "protocol": protocol,
        "topic": topic,
        "churn_s": round(churned_s, 1),
        "kills_sigterm": sum(1 for c in changes if c["action"] == "SIGTERM"),
        "kills_sigkill": sum(1 for c in changes if c["action"] == "SIGKILL"),
        "starts": sum(1 for c in changes[initial_changes:] if c["action"] == "start"),
        "records": len(acked),
        "send_failures": len(producing.failed),
        "drained": drained,
        "lost": len(set(acked) - set(counts)),
        "lost_examples": sorted(set(acked) - set(counts))[:20],
        "duplicates": duplicates,
        "duplicates_per_change": duplicates / churn_changes if churn_changes else 0.0,
        "changes": changes,
        "commit_refusals_rebalancing": len(refusals),
        "commit_refusals_by_error": dict(Counter(f["error"] for f in refusals)),
        "commit_errors": len(errors),
        "commit_errors_revoked": len(revoked),
        "commit_failures": failures,
        "level_stalls": stalls,
        "longest_level_stall_s": longest["stall_s"],
        "level_stalls_under_traffic": traffic,
        "longest_level_stall_under_traffic_s": max(t["stall_s"] for t in traffic.values()),
        # Where it was: the level, and the membership change before it began.
        "longest_level_stall": {
            "level": level, **longest,
            "after_change": ({**before[-1], "seconds_before": longest["from"] - before[-1]["at"]}
                             if before else None),
        },
        "join_to_full_s": joins,
        "join_to_full_median_s": statistics.median(reached) if reached else None,
        "join_to_full_max_s": max(reached, default=None),
        "watchdog_bound_s": WATCHDOG_BOUND_S,
        "longest_rejoin_wait": longest_wait,
        "syncs_with_partitions": sum(synced for synced, _ in syncs),
        "syncs_never_applied": sum(dropped for _, dropped in syncs),
        "rejoin_waits_over_bound": [w for w in waits if w["wait_s"] > WATCHDOG_BOUND_S],
        "watchdog_warnings": sum(1 for line in logs if "has not progressed" in line),
        "error_log_lines": [line for line in logs if " ERROR " in line or "Traceback" in line],
        "exit_codes": exit_codes,
    }
    result["ok"] = (
        drained and result["lost"] == 0 and not revoked
        and longest["stall_s"] <= WATCHDOG_BOUND_S
    )
    return result


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _table(runs: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| client | protocol | minutes | load before | kills SIGTERM/SIGKILL | starts | records "
        "| lost | duplicates | duplicates per change | longest level stall (under traffic) "
        "| start to full assignment, median / max (reached) | commits refused while rebalancing "
        "| commit errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        joins = r["join_to_full_s"]
        lines.append(
            f"| {r['client']} | {r['protocol']} | {r['churn_s'] / 60:.1f} | "
            f"{r['load_average_before'][0]:.1f} | {r['kills_sigterm']}/{r['kills_sigkill']} | "
            f"{r['starts']} | {r['records']} | {r['lost']} | {r['duplicates']} | "
            f"{r['duplicates_per_change']:.1f} | {r['longest_level_stall_s']:.2f} s "
            f"({r['longest_level_stall_under_traffic_s']:.2f} s) | "
            f"{_seconds(r['join_to_full_median_s'])} / {_seconds(r['join_to_full_max_s'])} "
            f"({sum(j is not None for j in joins)} of {len(joins)}) | "
            f"{r['commit_refusals_rebalancing']} | {r['commit_errors']} "
            f"({r['commit_errors_revoked']} for a revoked partition) |"
        )
    return "\n".join(lines)


def churn_side(
    bootstrap_servers: str, client: str, protocol: str, seconds: float, rate: float, seed: int,
    out: Path, debug: str | None = None,
) -> dict[str, Any]:
    """Contender: one :func:`run_churn`, the members' logs kept in
    ``<out>/churn-<client>-<protocol>/run-<n>/`` (the evidence of what the figures say)."""
    folder = out / f"{NAME}-{client}-{protocol}"
    folder.mkdir(parents=True, exist_ok=True)
    workdir = folder / f"run-{len(list(folder.glob('run-*')))}"
    workdir.mkdir()
    run = run_churn(bootstrap_servers, protocol, seconds, rate, seed, workdir, client, debug)
    return {**run, "workdir": str(workdir)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the scenario; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.smoke:
        args.minutes = 0.5
    protocols = PROTOCOLS if args.protocol == "all" else (args.protocol,)
    # kafka-python has no consumer protocol; every side churns with the same seed.
    sides = [(client, protocol) for client in clients_of(args) for protocol in protocols
             if family(client).consumer_protocol or protocol != "consumer"]
    if not sides:
        raise SystemExit("kafka-python has no consumer protocol: use --client confluent")
    for client, protocol in sides:
        shutil.rmtree(args.out / f"{NAME}-{client}-{protocol}", ignore_errors=True)
    debug = args.librdkafka_debug
    with broker(args) as servers:
        interleaved = interleave(
            [Contender(f"{client}/{protocol}", churn_side, {
                "bootstrap_servers": servers, "client": client, "protocol": protocol,
                "seconds": args.minutes * 60, "rate": args.rate, "seed": args.seed,
                "out": args.out, "debug": debug if family(client).consumer_protocol else None,
            }) for client, protocol in sides],
            args.rounds, timeout_s=args.minutes * 60 + 900,
        )
    runs = [
        {**run, "round": number + 1, "load_average_before": interleaved.load_averages[name][number]}
        for name in interleaved.results
        for number, run in enumerate(interleaved.results[name])
    ]
    table = _table(runs)
    print(table)
    result = {
        "smoke": args.smoke,
        "levels": LEVELS,
        "partitions_per_level": PARTITIONS,
        "rate_per_s": args.rate,
        "seed": args.seed,
        "interval_s": list(INTERVAL_S),
        "handler_ms": child.HANDLER_S * 1000,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "interleaving": interleaved.summary(),
        "runs": runs,
        "table": table,
        "ok": all(run["ok"] for run in runs),
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
