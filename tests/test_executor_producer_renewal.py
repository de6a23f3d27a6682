"""An exactly-once executor whose transactional producer is fenced mid-commit, against the real
broker on both client families: the transaction coordinator aborts a transaction left open
past ``transaction.timeout.ms`` (a process frozen between its last send and its commit) and
bumps the producer's epoch, so the commit and the abort are refused for good. Given a
factory, the executor replaces the producer and every output is still written once."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from benchmarks._running import Running, wait_for
from priority_kafka import Output, TransactionError
from priority_kafka.executor import ShardedExecutor
from priority_kafka.families import family as registered
from tests.conftest import over_families
from tests.test_executor import create_topic, produce
from tests.test_executor_exactly_once import committed_reader, read_committed
from tests.test_executor_offset_map import PARTITIONS

pytestmark = pytest.mark.integration

RECORDS = 300
KEYS = 13
#: Short, so the coordinator aborts the stalled transaction within about two seconds (its
#: check runs every second: LocalKafkaBroker sets the cleanup interval).
TRANSACTION_TIMEOUT_MS = 1000


class Stall:
    """Holds the first commit with outputs it is asked to, after everything but the commit
    was sent, until the coordinator has aborted the transaction (its marker appears in the
    output topic)."""

    def __init__(self, bootstrap: str, out_topic: str) -> None:
        self._bootstrap = bootstrap
        self._tps = [TopicPartition(out_topic, p) for p in range(PARTITIONS)]
        self.held = threading.Event()
        self.released = threading.Event()

    def __call__(self) -> None:
        if self.held.is_set():
            return
        probe = KafkaConsumer(bootstrap_servers=self._bootstrap)
        try:
            # Nothing was committed before: what the topic holds is this transaction's.
            delivered = sum(probe.end_offsets(self._tps).values())
            if not delivered:  # offsets only (the marker would not show here): not this one
                return
            self.held.set()
            deadline = time.monotonic() + 60
            while sum(probe.end_offsets(self._tps).values()) <= delivered:
                assert time.monotonic() < deadline, "the coordinator did not abort in 60 s"
                time.sleep(0.05)
        finally:
            probe.close()
        self.released.set()


def stalling_factory(client: str, bootstrap: str, transactional_id: str, stall: Stall,
                     built: list[Any]) -> Callable[[], Any]:
    """A factory of transactional producers of ``client``'s family; the first one's first
    commit waits in ``stall`` first."""
    if not registered(client).librdkafka:
        def build() -> Any:
            producer = KafkaProducer(bootstrap_servers=bootstrap,
                                     transactional_id=transactional_id,
                                     transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
            # KafkaTransactions starts the commit on the transaction manager (to bound its
            # wait, which KafkaProducer.commit_transaction does not): stall there.
            manager = producer._transaction_manager
            begin_commit = manager.begin_commit

            def stalling_begin_commit() -> Any:
                if producer is built[0]:
                    stall()
                return begin_commit()

            manager.begin_commit = stalling_begin_commit
            built.append(producer)
            return producer
        return build

    from confluent_kafka import Producer

    class StallingConfluent(Producer):
        def commit_transaction(self, *args: Any) -> Any:
            if self is built[0]:
                self.flush(30)  # librdkafka's commit would deliver them: do it before the stall
                stall()
            return super().commit_transaction(*args)

    def build_confluent() -> Any:
        built.append(StallingConfluent({
            "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }))
        return built[-1]
    return build_confluent


def fenced_run(
    bootstrap: str, unique_name: Callable[[str], str], client: str, factory: bool,
) -> tuple[str, Stall, list[Any], ShardedExecutor, Running]:
    """An exactly-once executor running over a new keyed input topic into an output topic
    (returned), with a factory whose first producer stalls (``factory`` False: the executor
    gets that producer itself); the producers built so far in the list."""
    topic, out, group = unique_name("renew-in"), unique_name("renew-out"), unique_name("g")
    create_topic(bootstrap, topic, PARTITIONS)
    create_topic(bootstrap, out, PARTITIONS)
    produce(bootstrap, topic, RECORDS, keys=KEYS)
    stall = Stall(bootstrap, out)
    built: list[Any] = []
    make = stalling_factory(client, bootstrap, f"{group}-tx", stall, built)
    executor = ShardedExecutor(
        committed_reader(client, bootstrap, group),
        lambda record: Output(out, value=record.value, key=record.key), shards=4,
        commit_interval_ms=200, transactional_producer=make if factory else make(),
    )
    executor.subscribe([topic])
    return out, stall, built, executor, Running(executor)


@over_families("producer_renewal", argname="client")
def test_a_producer_fenced_mid_commit_is_replaced_from_the_factory(
    bootstrap_servers: str, unique_name: Callable[[str], str], client: str,
) -> None:
    """The first producer stalls in its first commit until the coordinator aborted that
    transaction (past its timeout, bumping the epoch); the commit fails, its abort too, and
    the executor goes on with a new producer from the factory: the stalled transaction's
    records are handled again and every output is committed once."""
    out, stall, built, executor, run = fenced_run(bootstrap_servers, unique_name, client,
                                                  factory=True)
    try:
        wait_for(stall.released.is_set, 90, "the coordinator to abort the stalled transaction")
        wait_for(lambda: executor.stats().outputs >= RECORDS or run.error is not None, 90,
                 "every output committed")
    finally:
        run.stop()
    assert run.error is None
    stats = executor.stats()
    assert stats.aborted_transactions >= 1 and stats.renewed_producers == 1, stats
    assert len(built) == 2
    output = read_committed(bootstrap_servers, out, PARTITIONS)
    # produce() gives key k the values k:0, k:1, ...
    values = {f"{i % KEYS}:{i // KEYS}".encode() for i in range(RECORDS)}
    assert set(output) == values and max(output.values()) == 1


@over_families("producer_renewal", argname="client")
def test_a_producer_fenced_mid_commit_stops_an_executor_given_the_producer(
    bootstrap_servers: str, unique_name: Callable[[str], str], client: str,
) -> None:
    """Given a producer (not a factory), the executor cannot replace it: it stops with a
    TransactionError, and nothing of the stalled transaction is committed."""
    out, stall, built, executor, run = fenced_run(bootstrap_servers, unique_name, client,
                                                  factory=False)
    try:
        wait_for(lambda: run.error is not None, 90, "the executor to stop")
    finally:
        run.stop()
        with contextlib.suppress(Exception):  # confluent's close raises the fence again
            built[0].close()
    assert isinstance(run.error, TransactionError) and "cannot go on" in str(run.error)
    assert stall.released.is_set()
    # Earlier transactions held offsets only (none of their records was done yet).
    assert executor.stats().outputs == 0
    assert read_committed(bootstrap_servers, out, PARTITIONS) == {}
