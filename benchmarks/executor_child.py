"""A ShardedExecutor in its own process, for the churn scenario and the soak (benchmarks/churn.py,
benchmarks/soak.py), the crash and signal tests of tests/test_executor.py and the crash loop of
tests/faults (here, beside the benchmarks, as the tests import benchmarks and never the other
way).

Usage: python benchmarks/executor_child.py BOOTSTRAP TOPIC GROUP OUT_FILE INSTANCE_ID [LEVELS]
           [--strategy eager|cooperative] [--timestamps] [--session-timeout-ms MS]
           [--client kafka-python|confluent|aiokafka] [--group-protocol classic|consumer]
           [--debug CONTEXTS] [--stuck LINE] [--no-offset-map]
           [--shards N] [--handler-ms MS] [--commit-interval-ms MS] [--exactly-once OUT]
           [--share] [--slow-flag PATH --slow-ms MS] [--budget RATE] [--sync-handler]
Appends ``partition offset`` for every record it handles to OUT_FILE (one ``write`` per line,
so a kill -9 never leaves half a line), and stops gracefully on SIGTERM/SIGINT. With LEVELS,
it consumes the priority topics of TOPIC through a PriorityConsumer and appends each record's
value instead. An empty INSTANCE_ID means dynamic membership (no ``group_instance_id``).
``--client confluent`` runs the executor on ``priority_kafka.confluent``'s PriorityConsumer
(with LEVELS) or a plain ``confluent_kafka.Consumer`` (without) through its executor adapter
instead; there ``--strategy`` picks librdkafka's ``range`` (eager) or ``cooperative-sticky``
assignor, ``--group-protocol consumer`` joins with the consumer protocol (KIP-848: the broker
assigns, and owns the session timeout) and ``--debug`` sets librdkafka's ``debug`` (its log goes
to stderr, stamped). ``--client aiokafka`` (a family whose consumer lives on the caller's loop)
runs ``await executor.run_async()`` inside ``asyncio.run`` over the aio PriorityConsumer (with
LEVELS) or a plain ``AIOKafkaConsumer``, both built and started on that loop, the handler an
``async def`` awaiting ``asyncio.sleep`` (a task of that loop, ``async_concurrency`` = the
shards), or with ``--sync-handler`` the plain ``def`` handler of the other families, which
``run_async()`` runs on the worker threads; SIGTERM/SIGINT stop it through the loop's signal
handlers.

``--stuck LINE``: the handler of the record whose line would be LINE never returns (nor writes
it): a record in progress when the process is killed. ``--no-offset-map``: the executor commits
the watermark alone (``offset_map=False``). ``--shards``, ``--handler-ms`` and
``--commit-interval-ms`` override SHARDS, HANDLER_S and COMMIT_INTERVAL_MS.
``--exactly-once OUT``: the executor runs exactly-once, its handler returning each record's
value and key as an ``Output`` to topic OUT, through transactional producers (built by a
factory, so a fenced one is replaced) of the client's family whose transactional id is
``<GROUP>-<INSTANCE_ID>`` (the same across restarts, so a restart fences the killed process's
producer and aborts its open transaction); the consumer reads with ``read_committed``.

``--share`` (with ``--client confluent`` and LEVELS) runs a share-group member instead: a
``ShareExecutor`` over a ``PriorityShareConsumer`` whose level groups are GROUP-<level> (the
parent sets their ``share.auto.offset.reset``), ACCEPTing every record its handler returns from.
``--slow-flag PATH``: while the file PATH exists the handler takes ``--slow-ms`` instead of
``--handler-ms`` (the soak's slow-handler phase, switched from outside without a restart).

``--budget RATE``: the executor spends a budget of RATE records/s (``Budgets``).

``--timestamps`` appends `` <time.time()>`` to every line, and writes to stderr, each line
starting with its ``time.time()``, the warnings (the executor's commit failures among them),
kafka-python's coordinator debug log (joins, syncs, heartbeats) and every listener call as
``<time> EVENT assigned|revoked|lost topic:partition ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

from priority_kafka import Budgets, PriorityConsumer
from priority_kafka.executor import Output, ShardedExecutor
from priority_kafka.families import DEFAULT, having
from priority_kafka.families import family as registered
from priority_kafka.kafka_python._kafka import ConsumerRebalanceListener, TopicPartition

#: Settings the parent test uses to bound the duplicates a crash may cause.
SHARDS = 8
MAX_IN_FLIGHT = 200
MAX_POLL_RECORDS = 100
COMMIT_INTERVAL_MS = 100
HANDLER_S = 0.002
SESSION_TIMEOUT_MS = 10000
STRATEGIES = {"eager": RangePartitionAssignor, "cooperative": CooperativeStickyAssignor}
#: --memory-snapshots: seconds between two dumps.
MEMORY_SNAPSHOT_S = 300.0
CONFLUENT_STRATEGIES = {"eager": "range", "cooperative": "cooperative-sticky"}


class EventLog(ConsumerRebalanceListener):
    """Writes every listener call to stderr, stamped with ``time.time()``."""

    @staticmethod
    def _write(kind: str, partitions: Iterable[TopicPartition]) -> None:
        parts = " ".join(sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))
        sys.stderr.write(f"{time.time():.3f} EVENT {kind} {parts}\n")
        sys.stderr.flush()

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._write("revoked", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._write("assigned", assigned)

    def on_partitions_lost(self, lost: Any) -> None:
        self._write("lost", lost)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "group", "out", "instance_id"):
        parser.add_argument(name)
    parser.add_argument("levels", nargs="?", type=int, default=0)
    parser.add_argument("--strategy", choices=sorted(STRATEGIES))
    parser.add_argument("--timestamps", action="store_true")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS)
    # The families whose clients this child builds: synchronous ones, by their calls
    # (Family.librdkafka), and those whose consumer lives on the caller's loop (run_async()).
    parser.add_argument(
        "--client", default=DEFAULT.name,
        choices=[one.name for one in (*having("synchronous"), *having("caller_loop"))],
    )
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--debug")
    parser.add_argument("--stuck")
    parser.add_argument("--no-offset-map", dest="offset_map", action="store_false")
    parser.add_argument("--shards", type=int, default=SHARDS)
    parser.add_argument("--handler-ms", type=float, default=HANDLER_S * 1000)
    parser.add_argument("--commit-interval-ms", type=int, default=COMMIT_INTERVAL_MS)
    parser.add_argument("--exactly-once", metavar="OUT")
    parser.add_argument("--share", action="store_true")
    parser.add_argument("--slow-flag")
    parser.add_argument("--slow-ms", type=float, default=0.0)
    parser.add_argument("--budget", type=float, help="records/s of one downstream budget")
    parser.add_argument("--memory-snapshots", metavar="DIR",
                        help="trace allocations and dump a tracemalloc snapshot there every "
                             "MEMORY_SNAPSHOT_S (a leak hunt: about twice the memory)")
    parser.add_argument("--sync-handler", action="store_true",
                        help="on the caller's loop: a plain def handler (the worker threads)")
    args = parser.parse_args(argv)
    one = registered(args.client)
    # Share groups (KIP-932) are read with librdkafka's share consumer only.
    if args.share and (not one.librdkafka or not args.levels or args.exactly_once):
        parser.error("--share needs --client confluent and LEVELS, and is at-least-once only")
    if not one.consumer_protocol and (args.group_protocol == "consumer" or args.debug):
        parser.error("--group-protocol consumer and --debug need --client confluent")
    if args.group_protocol == "consumer" and args.strategy:
        parser.error("--group-protocol consumer takes no --strategy: the broker assigns")
    # run_async(): no exactly-once nor budgets with an async handler (the executor refuses
    # both), and the assignors and the listener here are kafka-python's.
    if args.sync_handler and not one.caller_loop:
        parser.error("--sync-handler is for a client whose consumer lives on the caller's loop")
    if one.caller_loop and (args.exactly_once or args.budget is not None or args.strategy
                            or args.timestamps):
        parser.error(f"--client {one.name} takes no --exactly-once, --budget, --strategy or "
                     "--timestamps")
    return args


def confluent_consumer(args: argparse.Namespace) -> Any:
    """The executor's consumer on confluent-kafka, with the settings of the kafka-python one."""
    from confluent_kafka import Consumer

    from priority_kafka.confluent import PriorityConsumer as ConfluentPriorityConsumer

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    }
    if args.group_protocol == "consumer":
        # The session timeout is the group's (the parent sets it): librdkafka refuses it here.
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = args.session_timeout_ms
    if args.strategy:
        config["partition.assignment.strategy"] = CONFLUENT_STRATEGIES[args.strategy]
    if args.debug:
        config["debug"] = args.debug
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    if not args.levels:
        return Consumer(config)
    return ConfluentPriorityConsumer(
        {**config, "max.poll.records": MAX_POLL_RECORDS, "max.priority": args.levels}
    )


def transactional_producer(args: argparse.Namespace) -> Any:
    """With --exactly-once, a factory of transactional producers of the client's family: a
    member frozen mid-commit past the transaction timeout gets its producer fenced by the
    coordinator, and the executor goes on with a new one."""
    if not args.exactly_once:
        return None
    transactional_id = f"{args.group}-{args.instance_id or 'dynamic'}"
    if registered(args.client).librdkafka:
        from confluent_kafka import Producer

        return lambda: Producer({"bootstrap.servers": args.bootstrap,
                                 "transactional.id": transactional_id, "linger.ms": 5})
    return lambda: KafkaProducer(bootstrap_servers=args.bootstrap,
                                 transactional_id=transactional_id, linger_ms=5)


def dump_memory_snapshots(directory: str) -> None:
    """Trace allocations (10 frames) and, from a daemon thread, dump a snapshot every
    :data:`MEMORY_SNAPSHOT_S` to ``directory``/``<pid>-<seconds>.tracemalloc`` (compare two
    with ``tracemalloc.Snapshot.load(...).compare_to(...)``)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(10)
    started = time.monotonic()

    def dump() -> None:
        while True:
            time.sleep(MEMORY_SNAPSHOT_S)
            at = int(time.monotonic() - started)
            tracemalloc.take_snapshot().dump(str(out / f"{os.getpid()}-{at:05d}.tracemalloc"))

    threading.Thread(target=dump, name="memory-snapshots", daemon=True).start()


def main(argv: list[str]) -> None:
    args = parse(argv)
    if args.memory_snapshots:
        dump_memory_snapshots(args.memory_snapshots)
    # A parent whose wait on this process times out asks, by SIGUSR1, where every thread is.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    configs: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap, "group_id": args.group,
        "group_instance_id": args.instance_id or None,
        "enable_auto_commit": False, "auto_offset_reset": "earliest",
        "session_timeout_ms": args.session_timeout_ms, "max_poll_records": MAX_POLL_RECORDS,
    }
    if args.strategy:
        configs["partition_assignment_strategy"] = [STRATEGIES[args.strategy]]
    if args.exactly_once:
        configs["isolation_level"] = "read_committed"
    if args.exactly_once or args.timestamps:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                            format="%(created).3f %(levelname)s %(name)s %(message)s")
    if args.exactly_once:
        # Every transactional request and response, with its error code and state changes:
        # a failed transaction in a CI run can then be read (about 7 lines a second).
        logging.getLogger("kafka.producer.transaction_manager").setLevel(logging.DEBUG)
    if args.exactly_once or args.timestamps:
        # Handles closed in the background say when they end (the soak's leak check).
        logging.getLogger("priority_kafka.confluent").setLevel(logging.INFO)
    if args.timestamps:
        # The group's joins, syncs and heartbeat failures: the evidence for a stalled level.
        logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)
    if registered(args.client).caller_loop:
        asyncio.run(run_on_callers_loop(args, configs, fd))
        os.close(fd)
        return
    consumer: Any = None
    if args.share:
        pass  # run_share_member builds its own
    elif registered(args.client).librdkafka:
        consumer = confluent_consumer(args)
    elif args.levels:
        consumer = PriorityConsumer(max_priority=args.levels, **configs)
    else:
        consumer = KafkaConsumer(**configs)

    handler = plain_handler(args, fd)
    if args.share:
        run_share_member(args, handler)
        os.close(fd)
        return
    executor = ShardedExecutor(
        consumer, handler, shards=args.shards, max_in_flight_per_partition=MAX_IN_FLIGHT,
        commit_interval_ms=args.commit_interval_ms, offset_map=args.offset_map,
        transactional_producer=transactional_producer(args),
        budgets=None if args.budget is None else Budgets({"downstream": args.budget}),
    )
    executor.subscribe([args.topic], listener=EventLog() if args.timestamps else None)
    print("ready", flush=True)
    executor.run()  # the default on the main thread: SIGTERM and Ctrl-C stop it gracefully
    os.close(fd)


def plain_handler(args: argparse.Namespace, fd: int) -> Callable[[Any], Any]:
    """The ``def`` handler: sleeps ``--handler-ms`` (``--slow-ms`` under ``--slow-flag``),
    then writes the record's line (its Output under ``--exactly-once``)."""
    handler_s, slow_s = args.handler_ms / 1000, args.slow_ms / 1000

    def handler(record: Any) -> Any:
        slow = args.slow_flag is not None and os.path.exists(args.slow_flag)
        time.sleep(slow_s if slow else handler_s)
        line = record.value.decode() if args.levels else f"{record.partition} {record.offset}"
        if line == args.stuck:
            threading.Event().wait()  # in progress until the process is killed
        if args.timestamps:
            line = f"{line} {time.time():.3f}"
        os.write(fd, f"{line}\n".encode())
        if args.exactly_once:
            # Where the input was read: one input record's outputs are told apart from those
            # of a value the input log holds twice.
            source = f"{record.topic}:{record.partition}:{record.offset}".encode()
            return Output(args.exactly_once, value=record.value, key=record.key,
                          headers=[("source", source)])
        return None

    return handler


async def run_on_callers_loop(args: argparse.Namespace, configs: dict[str, Any], fd: int
                              ) -> None:
    """``--client aiokafka``: the executor on this loop, over a consumer started on it, an
    ``async def`` handler, until SIGTERM/SIGINT."""
    from aiokafka import AIOKafkaConsumer

    from priority_kafka.aio import PriorityConsumer as AioPriorityConsumer

    consumer: Any = (AioPriorityConsumer(max_priority=args.levels, **configs) if args.levels
                     else AIOKafkaConsumer(**configs))
    await consumer.start()
    handler_s, slow_s = args.handler_ms / 1000, args.slow_ms / 1000

    async def handler(record: Any) -> None:
        slow = args.slow_flag is not None and os.path.exists(args.slow_flag)
        await asyncio.sleep(slow_s if slow else handler_s)
        line = record.value.decode() if args.levels else f"{record.partition} {record.offset}"
        if line == args.stuck:
            await asyncio.Event().wait()  # in progress until the process is killed
        os.write(fd, f"{line}\n".encode())

    executor = ShardedExecutor(
        consumer, plain_handler(args, fd) if args.sync_handler else handler,
        shards=args.shards, max_in_flight_per_partition=MAX_IN_FLIGHT,
        commit_interval_ms=args.commit_interval_ms, offset_map=args.offset_map,
    )
    executor.subscribe([args.topic])
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, executor.stop)
    print("ready", flush=True)
    await executor.run_async()


def run_share_member(args: argparse.Namespace, handler: Any) -> None:
    """--share: a ShareExecutor over a PriorityShareConsumer of TOPIC, until SIGTERM."""
    from priority_kafka.confluent import PriorityShareConsumer, ShareExecutor

    consumer = PriorityShareConsumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "max.priority": args.levels, "max.poll.records": MAX_POLL_RECORDS,
    })
    executor = ShareExecutor(consumer, handler, shards=args.shards,
                             commit_interval_ms=args.commit_interval_ms)
    executor.subscribe([args.topic])
    print("ready", flush=True)
    executor.run(handle_signals=True)


if __name__ == "__main__":
    main(sys.argv[1:])
