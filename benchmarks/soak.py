"""Chaos soak: faults combined at random on a 3-node cluster for a chosen time, under steady
traffic, with the invariants checked throughout and every long-lived process watched for leaks.

On a local 3-node cluster whose nodes can be cut off (``LocalKafkaCluster(isolatable=True)``,
nodes fenced after 3 s as in the test suite's cluster), each lane (``--lanes``) is a client
family in one mode on a 3-level topic of its own (3 partitions per level, 3 replicas,
``min.insync.replicas=2``, 20 keys, ``--rate`` records/s, a producer of the family with
``acks=all``), handled by ``--members`` member processes (``benchmarks/executor_child.py``):

* ``kafka-python``, ``confluent``: ``ShardedExecutor`` over the family's ``PriorityConsumer``,
  at least once (both families' default, eager, assignors);
* ``kafka-python-eos``, ``confluent-eos``: the same exactly-once: each record's value goes to
  an output topic in the executor's transactions (static members, whose instance id is their
  transactional id: a replacement fences the killed process's producer);
* ``share``: ``ShareExecutor`` over ``priority_kafka.confluent.PriorityShareConsumer``.

A scheduler (seeded: ``--seed``, printed) starts a fault every 4-15 s (2-5 s with
``--smoke``), each kind once in a shuffled order before any repeats, running alongside the
faults still under way: ``leader-kill`` (SIGKILL of the leader of a level-2 partition, restart
after 3-10 s), ``controlled-shutdown`` (SIGTERM of a node, restart after 3-10 s),
``cut-off`` (a node cut off through the proxies, ``drop`` or ``reject``, for 5-15 s), at most
one of those three at a time and each only once the cluster is in sync again;
``member-kill`` (SIGKILL of a lane's member, a new one 1-5 s later; member 0 of each lane is
never killed: it is the long-lived process the leak check watches); ``partitions-added`` (one
more partition on a level topic of an at-least-once or share lane, at most 2 per topic);
``slow-handler`` (every handler takes 25 ms instead of 2 for 5-15 s).

Checked throughout, from the members' handled logs (per-key order in handling-time order, each
line judged 2 s after it was written) and the exactly-once outputs (read ``read_committed``):

* ``lost``: acknowledged records never handled (0); ``order_breaks``: a key's record handled
  for the first time after a later one of the key (0; a key that moved to an added partition
  is counted apart, ``order_breaks_key_moved``: Kafka orders a key within one partition);
* exactly-once: outputs ``missing`` and ``duplicated`` (0), and the outputs' per-key order;
* ``duplicates`` per fault (each handling beyond a record's first is put on the latest fault
  of its lane before it) against the documented crash bound (docs/reliability.md: per
  partition ``max_in_flight_per_partition`` + one poll, 300 here, times the lane's partitions);
  share lane: ``redelivered_after_ack`` counts records handled again although the member that
  first handled them lived 2 s longer (its ACCEPT was due with the next poll);
* ``longest_stall_outside_faults``: per lane and level, the longest time records were waiting
  and none was handled, outside every fault's window (from its start until it ended and every
  partition of the lane handled a record sent after its start);
* per fault, ``recovery_s``: from its start until every partition of every lane handled a
  record sent after it;
* every process's RSS, threads and open file descriptors (psutil, every ``--sample-s``): start,
  end and least-squares slope after a warm-up; ``leak`` names a long-lived process whose fitted
  line rose past the tolerance (:data:`benchmarks._soak.LEAK_RISE`).

Writes ``soak.json``, ``soak.png`` (records/s per level and lane, faults marked) and prints a
table; the members' logs and the nodes' data and ``server.log`` stay in ``<out>/soak-run/``.

    python -m benchmarks.soak --duration 1800 [--seed S] [--rate R] [--lanes ...] [--faults ...]
        [--trace-memory LANE ...]
    python -m benchmarks.soak --smoke   # 40 s of faults (tests/test_benchmarks_smoke_soak.py)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import random
import shutil
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import _soak, _soak_report
from benchmarks._common import parse_args, write_result
from benchmarks._soak import LANES, Lane, Sampler
from priority_kafka.naming import priority_topic
from priority_kafka.testing import LocalKafkaCluster

NAME = "soak"
FAULTS = ("leader-kill", "member-kill", "controlled-shutdown", "cut-off", "partitions-added",
          "slow-handler")
BROKER_FAULTS = frozenset({"leader-kill", "controlled-shutdown", "cut-off"})
GAP_S, SMOKE_GAP_S = (4.0, 15.0), (2.0, 5.0)
#: How long partitions-added asks again while the controller has every node fenced.
FENCED_RETRY_S = 60.0
DOWN_S = (3.0, 10.0)
CUT_S = (5.0, 15.0)
SLOW_S = (5.0, 15.0)
MEMBER_DOWN_S = (1.0, 5.0)
MAX_ADDED = 2
#: As the test suite's cluster (priority_kafka.pytest_plugin.CLUSTER_TEST_PROPERTIES): a dead
#: node is fenced after 3 s.
CLUSTER_PROPERTIES = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
#: --smoke's lanes: the ones that hold under these faults today. The exactly-once lanes do not
#: yet (docs/reliability.md, "Chaos soak"): in CI they would fail every run.
SMOKE_LANES = tuple(name for name, spec in LANES.items() if spec.mode != "exactly-once")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=1800.0,
                        help="seconds of faults (40 with --smoke)")
    parser.add_argument("--seed", type=int, help="of the fault schedule (drawn if not given)")
    parser.add_argument("--rate", type=float, default=40.0, help="records/s per lane")
    parser.add_argument("--lanes", nargs="+", choices=sorted(LANES), help="default: all")
    parser.add_argument("--faults", nargs="+", choices=FAULTS, help="default: all")
    parser.add_argument("--members", type=int, default=2, help="member processes per lane")
    parser.add_argument("--sample-s", type=float, default=10.0, help="resource sampling period")
    parser.add_argument("--trace-memory", nargs="+", choices=sorted(LANES), default=[],
                        help="lanes whose members dump tracemalloc snapshots (into the lane's "
                             "workdir, memory/) every 5 minutes: a leak hunt")


class Soak:
    """The lanes on ``cluster`` and the faults done to them."""

    def __init__(self, cluster: LocalKafkaCluster, args: argparse.Namespace, seed: int,
                 workdir: Path) -> None:
        self.cluster, self.args, self.workdir = cluster, args, workdir
        self.rng = random.Random(seed)
        self.t0 = time.time()
        self.sampler = Sampler(args.sample_s)
        self.slow_flag = workdir / "slow"
        prefix = f"soak-{seed}-{os.getpid()}"
        self.lanes = [Lane(LANES[name], cluster.bootstrap_servers, prefix, args.rate, workdir,
                           self.slow_flag) for name in args.lanes]
        for lane in self.lanes:
            if lane.spec.name in args.trace_memory:
                lane.options += ["--memory-snapshots", str(lane.workdir / "memory")]
        self.faults: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []
        self._broker_busy = threading.Lock()
        self._slow_busy = threading.Lock()
        self._lane_busy = {lane.spec.name: threading.Lock() for lane in self.lanes}
        self._added: Counter[str] = Counter()
        self._queue: list[str] = []
        self._stop_tailing = threading.Event()
        self._main_calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self.load_averages: list[tuple[float, list[float]]] = []

    # -- processes ----------------------------------------------------------------------------

    def watch_brokers(self) -> None:
        for broker_id in self.cluster.running_brokers:
            broker = self.cluster.broker(broker_id)
            self.sampler.watch(f"broker-{broker_id} pid {broker.pid}", broker.pid)

    def start_member(self, lane: Lane, replacing: Any = None) -> None:
        member = lane.start_member(replacing)
        self.sampler.watch(f"{lane.spec.name}/member-{member.number}", member.process.pid)

    def supervise(self) -> None:
        """Start a replacement for every member that ended by itself (not killed by a fault),
        as a deployment's supervisor would, and record it (``member-died``: a finding)."""
        for lane in self.lanes:
            for member in list(lane.members):
                if member.alive() or member.number in lane.killed:
                    continue
                lane.killed.add(member.number)
                errors = [line for line in member.log.read_text().splitlines()
                          if "Error" in line or "Exception" in line]
                fault = self._record("member-died", [lane.spec.name], member=member.number,
                                     exit_code=member.process.returncode,
                                     error=errors[-1][-400:] if errors else None)
                self.start_member(lane, member)
                self._end(fault, started=lane.members[-1].number)

    def _start_members(self, lane: Lane) -> None:
        for _ in range(self.args.members):
            self.start_member(lane)

    def tail(self) -> None:
        """Check what the members handled, every second, until the drain ends."""
        last_status = time.monotonic()
        while not self._stop_tailing.wait(1.0):
            for lane in self.lanes:
                lane.tail(self.t0)
            if time.monotonic() - last_status >= 30:
                last_status = time.monotonic()
                print(f"[{self.now():7.1f} s] " + "; ".join(
                    f"{lane.spec.name}: {len(lane.first_member)} handled, "
                    f"{len(lane.duplicates)} again, {len(lane.order_breaks)} order breaks"
                    for lane in self.lanes), flush=True)

    def now(self) -> float:
        return time.time() - self.t0

    def on_main(self, call: Callable[[], Any]) -> Any:
        """``call()`` on the main thread, which :meth:`serve` runs: a node started from a
        fault's thread would die when that thread ends (the testing broker's JVM gets
        ``PR_SET_PDEATHSIG``, which Linux ties to the thread that started it)."""
        if threading.current_thread() is threading.main_thread():
            return call()
        future: Future[Any] = Future()
        self._main_calls.put((call, future))
        return future.result()

    def serve(self, seconds: float) -> None:
        """Run the calls :meth:`on_main` queued, for ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                call, future = self._main_calls.get(timeout=left)
            except queue.Empty:
                return
            try:
                future.set_result(call())
            except BaseException as exc:  # the fault's thread raises it
                future.set_exception(exc)

    # -- faults -------------------------------------------------------------------------------

    def _record(self, kind: str, lanes: Sequence[str], **detail: Any) -> dict[str, Any]:
        fault = {"kind": kind, "at": round(self.now(), 2), "lanes": list(lanes),
                 "monotonic": time.monotonic(), **detail,
                 "partitions_at": {lane.spec.name: [
                     lane.partitions[priority_topic(lane.topic, level)]
                     for level in range(_soak.LEVELS)] for lane in self.lanes}}
        self.faults.append(fault)
        print(f"[{fault['at']:7.1f} s] {kind} {list(lanes)} {detail}", flush=True)
        return fault

    def _end(self, fault: dict[str, Any], **detail: Any) -> None:
        fault.update(detail, ended=round(self.now(), 2), ended_monotonic=time.monotonic())

    def _allowed(self, kind: str) -> bool:
        if kind in BROKER_FAULTS:
            return not self._broker_busy.locked()
        if kind == "member-kill":
            return any(lane.churnable() and not self._lane_busy[lane.spec.name].locked()
                       for lane in self.lanes)
        if kind == "partitions-added":
            return bool(self._growable())
        return not self._slow_busy.locked()

    def _growable(self) -> list[tuple[Lane, str]]:
        return [(lane, topic) for lane in self.lanes if lane.spec.mode != "exactly-once"
                for topic in lane.topics if self._added[topic] < MAX_ADDED]

    def draw(self, kinds: Sequence[str]) -> str | None:
        """The next fault: each kind once, in a shuffled order, before any comes again; the
        first of the queue that can start now."""
        if not self._growable():  # every topic got its partitions: that kind is done for good
            kinds = [kind for kind in kinds if kind != "partitions-added"]
            self._queue = [kind for kind in self._queue if kind != "partitions-added"]
        if not self._queue:
            self._queue = list(kinds)
            self.rng.shuffle(self._queue)
        for kind in self._queue:
            if self._allowed(kind):
                self._queue.remove(kind)
                return kind
        return None

    def start_fault(self, kind: str) -> None:
        run: Callable[[dict[str, float], float], None] = {
            "leader-kill": self._leader_kill, "controlled-shutdown": self._controlled_shutdown,
            "cut-off": self._cut_off, "member-kill": self._member_kill,
            "partitions-added": self._partitions_added, "slow-handler": self._slow_handler,
        }[kind]
        lock = (self._broker_busy if kind in BROKER_FAULTS
                else self._slow_busy if kind == "slow-handler" else None)
        if lock is not None:
            lock.acquire()
        # Draws happen here, on the scheduler's thread, so a seed gives one schedule.
        pause = {kind: self.rng.uniform(*span) for kind, span in (
            ("down", DOWN_S), ("cut", CUT_S), ("slow", SLOW_S), ("member", MEMBER_DOWN_S))}
        choice = self.rng.random()

        def guarded() -> None:
            try:
                run(pause, choice)
            except Exception as exc:  # a fault that failed is an error of the soak, reported
                where = traceback.extract_tb(exc.__traceback__)[-1]
                self.errors.append(f"{kind} at {self.now():.1f} s: {exc!r} "
                                   f"({where.filename}:{where.lineno} {where.name})")
                print(f"fault {kind} failed: {self.errors[-1]}", flush=True)
            finally:
                if lock is not None:
                    lock.release()

        thread = threading.Thread(target=guarded, name=f"fault-{kind}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _all_lanes(self) -> list[str]:
        return [lane.spec.name for lane in self.lanes]

    def _broker_back(self, fault: dict[str, Any], node: int) -> None:
        self.on_main(lambda: self.cluster.start_broker(node))
        self._end(fault, restarted_at=round(self.now(), 2))
        self.watch_brokers()
        self.cluster.wait_in_sync()
        fault["in_sync_at"] = round(self.now(), 2)

    def _leader_kill(self, pause: dict[str, float], choice: float) -> None:
        lane = self.lanes[int(choice * len(self.lanes))]
        topic = priority_topic(lane.topic, _soak.LEVELS - 1)
        node = self._leader_of(topic)
        fault = self._record("leader-kill", self._all_lanes(), node=node,
                             led=f"{topic}[0]", down_s=round(pause["down"], 1),
                             controller=node == self.cluster.active_controller())
        self.cluster.stop_broker(node, signal.SIGKILL)
        time.sleep(pause["down"])
        self._broker_back(fault, node)

    def _leader_of(self, topic: str, timeout_s: float = 60.0) -> int:
        """The leader of ``topic``'s partition 0, waited for: right after the node that led
        it came back in sync, a metadata answer was seen without one."""
        deadline = time.monotonic() + timeout_s
        while (node := self.cluster.leader_of(topic, 0)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}[0] has had no leader to kill for {timeout_s:g} s")
            time.sleep(0.5)
        return node

    def _controlled_shutdown(self, pause: dict[str, float], choice: float) -> None:
        node = self.cluster.broker_ids[int(choice * len(self.cluster.broker_ids))]
        fault = self._record("controlled-shutdown", self._all_lanes(), node=node,
                             down_s=round(pause["down"], 1))
        self.cluster.stop_broker(node, signal.SIGTERM)
        fault["stopped_at"] = round(self.now(), 2)
        time.sleep(pause["down"])
        self._broker_back(fault, node)

    def _cut_off(self, pause: dict[str, float], choice: float) -> None:
        ids = self.cluster.broker_ids
        node = ids[int(choice * len(ids))]
        how = "drop" if choice * len(ids) % 1 < 0.5 else "reject"
        fault = self._record("cut-off", self._all_lanes(), node=node, how=how,
                             cut_s=round(pause["cut"], 1),
                             controller=node == self.cluster.active_controller())
        try:
            self.cluster.isolate_broker(node, how)  # type: ignore[arg-type]
            time.sleep(pause["cut"])
        finally:  # never left cut off, whatever failed
            self.cluster.heal_broker(node)
        self._end(fault, healed_at=round(self.now(), 2))
        self.cluster.wait_in_sync()
        fault["in_sync_at"] = round(self.now(), 2)

    def _member_kill(self, pause: dict[str, float], choice: float) -> None:
        lanes = [lane for lane in self.lanes
                 if lane.churnable() and not self._lane_busy[lane.spec.name].locked()]
        lane = lanes[int(choice * len(lanes))]
        with self._lane_busy[lane.spec.name]:
            victims = lane.churnable()
            victim = victims[int(choice * len(victims) * 7) % len(victims)]
            fault = self._record("member-kill", [lane.spec.name], member=victim.number,
                                 down_s=round(pause["member"], 1))
            lane.killed.add(victim.number)
            victim.stop(signal.SIGKILL)
            fault["killed"] = {"member": victim.number, "at_wall": time.time()}
            time.sleep(pause["member"])
            self.start_member(lane, victim)
            self._end(fault, started=lane.members[-1].number)

    def _partitions_added(self, pause: dict[str, float], choice: float) -> None:
        from kafka.admin import KafkaAdminClient, NewPartitions
        from kafka.errors import InvalidReplicationFactorError

        growable = self._growable()
        lane, topic = growable[int(choice * len(growable))]
        self._added[topic] += 1
        total = lane.partitions[topic] + 1
        fault = self._record("partitions-added", [lane.spec.name], topic=topic, total=total)
        admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap_servers)
        deadline = time.monotonic() + FENCED_RETRY_S
        try:
            while True:
                try:
                    admin.create_partitions({topic: NewPartitions(total_count=total)})
                    break
                except InvalidReplicationFactorError as exc:
                    # "All brokers are currently fenced": the controller's answer while every
                    # node re-registers (a controller failover, a loaded machine's late
                    # heartbeats); the hour runs had it 1-2 times, each reported as an error.
                    if "fenced" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(1.0)
        finally:
            admin.close()
        lane.partitions[topic] = total
        fault["partitions_at"][lane.spec.name] = [
            lane.partitions[priority_topic(lane.topic, level)] for level in range(_soak.LEVELS)]
        self._end(fault)

    def _slow_handler(self, pause: dict[str, float], choice: float) -> None:
        fault = self._record("slow-handler", self._all_lanes(), slow_s=round(pause["slow"], 1),
                             handler_ms=_soak.SLOW_HANDLER_MS)
        self.slow_flag.touch()
        try:
            time.sleep(pause["slow"])
        finally:
            self.slow_flag.unlink()
        self._end(fault)

    # -- the run ------------------------------------------------------------------------------

    def run(self, duration_s: float, kinds: Sequence[str], gap_s: tuple[float, float]) -> float:
        """Warm up, then start faults for ``duration_s``; the seconds the faults ran."""
        self.sampler.watch("soak (this process)", os.getpid())
        self.watch_brokers()
        # The lanes' members start side by side (each waits for its child to be ready).
        with ThreadPoolExecutor(len(self.lanes), thread_name_prefix="soak-start") as starting:
            for future in [starting.submit(self._start_members, lane) for lane in self.lanes]:
                future.result()
        self.sampler.start()
        tailer = threading.Thread(target=self.tail, name="soak-tail", daemon=True)
        tailer.start()
        deadline = time.monotonic() + 180
        while not all(len(lane.per_second) == _soak.LEVELS for lane in self.lanes):
            if time.monotonic() > deadline:
                raise TimeoutError("every lane handling every level not within 180 s")
            time.sleep(0.5)
        self.warm_up_s = self.now()
        print(f"[{self.now():7.1f} s] warmed up; faults for {duration_s:g} s", flush=True)
        started = time.monotonic()
        next_at = started + self.rng.uniform(*gap_s)
        last_load = 0.0
        while time.monotonic() < started + duration_s:
            if time.monotonic() - last_load >= 60:
                last_load = time.monotonic()
                self.load_averages.append((round(self.now(), 1), list(os.getloadavg())))
            if time.monotonic() >= next_at:
                kind = self.draw(kinds)
                if kind is not None:
                    self.start_fault(kind)
                    next_at = time.monotonic() + self.rng.uniform(*gap_s)
            self.supervise()
            self.serve(0.2)
        faulted_s = time.monotonic() - started
        deadline = time.monotonic() + 300
        while any(t.is_alive() for t in self._threads) and time.monotonic() < deadline:
            self.serve(0.2)
        self.load_averages.append((round(self.now(), 1), list(os.getloadavg())))
        return faulted_s

    def drain(self, timeout_s: float) -> bool:
        """Stop producing and wait until every lane handled (and committed) what was acked."""
        self.traffic_end = self.now()
        for lane in self.lanes:
            try:
                lane.producing.stop()
            except Exception as exc:  # records left unsent: said, and the drain goes on
                self.errors.append(f"{lane.spec.name} producer: {exc!r}")
        deadline = time.monotonic() + timeout_s
        while not all(lane.drained() for lane in self.lanes):
            if time.monotonic() > deadline:
                self.errors.append(f"acknowledged records not all handled within {timeout_s:g} s")
                self.drained_at = self.now()
                return False
            self.supervise()
            time.sleep(0.5)
        self.drained_at = self.now()
        return True

    def stop(self) -> list[int | str]:
        """Stop the members gracefully, take their last lines, stop watching."""
        codes = [code for lane in self.lanes for code in lane.stop()]
        self._stop_tailing.set()
        for lane in self.lanes:
            lane.tail(self.t0, hold_s=0.0)
            if lane.reader is not None:
                lane.reader.read(5.0)
                lane.reader.close()
        self.sampler.stop()
        return codes


def main(argv: Sequence[str] | None = None, cluster: LocalKafkaCluster | None = None
         ) -> dict[str, Any]:
    """Run the soak (on ``cluster`` if given: a started isolatable 3-node cluster, else one
    started here); return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.brokers != 1:
        raise ValueError(f"--brokers {args.brokers}: the soak runs its own 3-node cluster")
    if args.bootstrap_servers and cluster is None:
        # `priority-kafka bench` passes its broker to every benchmark: said, not obeyed.
        print(f"the soak does not use --bootstrap-servers {args.bootstrap_servers}: it kills "
              f"and cuts off nodes, so it starts a 3-node cluster of its own", flush=True)
    if args.smoke:
        args.duration = 40.0
    args.lanes = args.lanes or list(SMOKE_LANES if args.smoke else sorted(LANES))
    kinds = args.faults or FAULTS
    if args.members < 2 or args.duration <= 0 or args.rate <= 0 or args.sample_s <= 0:
        raise ValueError(f"--members must be at least 2 (one is never killed: got "
                         f"{args.members}), and --duration ({args.duration}), --rate "
                         f"({args.rate}) and --sample-s ({args.sample_s}) positive")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"soak seed {seed}: lanes {args.lanes}, faults {list(kinds)}", flush=True)
    workdir = args.out / f"{NAME}-run"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        if cluster is None:
            # Its nodes' data and server.log stay in the workdir for a post-mortem.
            cluster = stack.enter_context(LocalKafkaCluster(
                3, CLUSTER_PROPERTIES, isolatable=True, log_dir=workdir / "cluster"))
        soak = Soak(cluster, args, seed, workdir)
        load_before = list(os.getloadavg())
        try:
            faulted_s = soak.run(args.duration, kinds, SMOKE_GAP_S if args.smoke else GAP_S)
            drained = soak.drain(180.0)
        finally:
            exit_codes = soak.stop()
        result = _result(soak, args, seed, faulted_s, drained, exit_codes, load_before)
    write_result(NAME, result, args.out)
    print(result["table"])
    return result


def _result(soak: Soak, args: argparse.Namespace, seed: int, faulted_s: float, drained: bool,
            exit_codes: list[int | str], load_before: list[float]) -> dict[str, Any]:
    lanes = {lane.spec.name: _soak_report.lane_figures(soak, lane) for lane in soak.lanes}
    # Long-lived: sampled over most of the sampling's span (it starts once the members run).
    times = [row[0] for rows in soak.sampler.samples.values() for row in rows]
    run_s = max(times, default=0.0) - min(times, default=0.0)
    resources = {label: _soak.resources(rows, run_s)
                 for label, rows in sorted(soak.sampler.samples.items())}
    # Member 0 of each lane is the long-lived client process the leak check is about; the soak
    # process keeps every record's tally (it grows by design) and the brokers are JVMs whose
    # heap grows to its maximum, so theirs are reported, not judged.
    leaks = {label: row["leak"] for label, row in resources.items()
             if "/member-0" in label and row["leak"]}
    chart_path = args.out / f"{NAME}.png"
    _soak_report.chart(soak, chart_path)
    result: dict[str, Any] = {
        "smoke": args.smoke, "seed": seed, "duration_s": args.duration,
        "faulted_s": round(faulted_s, 1), "warm_up_s": round(soak.warm_up_s, 1),
        "traffic_end_s": round(soak.traffic_end, 1), "drained_at_s": round(soak.drained_at, 1),
        "rate_per_lane": args.rate, "members_per_lane": args.members,
        "load_average_before": load_before, "load_averages": soak.load_averages,
        "faults": [{k: v for k, v in f.items() if "monotonic" not in k} for f in soak.faults],
        "lanes": lanes,
        "fault_summary": _soak_report.fault_summary(soak.faults),
        "resources": resources, "leaks": leaks,
        "drained": drained, "errors": soak.errors, "member_exit_codes": exit_codes,
        "members_died": sum(f["kind"] == "member-died" for f in soak.faults),
        "plot": chart_path.name, "workdir": str(soak.workdir),
    }
    result["table"] = _soak_report.table(result)
    result["ok"] = bool(
        drained and not soak.errors and not leaks and all(code == 0 for code in exit_codes)
        and all(lane["lost"] == 0 and lane["order_breaks"] == 0 and not lane["over_bound"]
                and lane["send_failures"] == 0 for lane in lanes.values())
        and all(lane["exactly_once"]["missing"] == 0 and lane["exactly_once"]["duplicated"] == 0
                for lane in lanes.values() if "exactly_once" in lane)
    )
    return result


if __name__ == "__main__":
    main()
