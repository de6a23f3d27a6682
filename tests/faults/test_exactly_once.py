"""Fault: exactly-once to Kafka under SIGKILLs of the processing process and a broker restart.

A ShardedExecutor in exactly-once mode (benchmarks/executor_child.py ``--exactly-once``) copies a
keyed 3-level priority topic to an output topic through a transactional producer of its client
family, while records are produced; the process is SIGKILLed again and again, and the broker is
restarted once in the middle. Afterwards a ``read_committed`` reader of the output topic must
see every acknowledged input exactly once (0 lost, 0 duplicates), however many times the
handlers ran.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import TopicPartition

from benchmarks._running import wait_for
from benchmarks._traffic import LEVELS, Producing, Tally
from priority_kafka import create_priority_topics
from priority_kafka.testing import LocalKafkaBroker
from tests.conftest import over_families
from tests.faults.test_crash_loop import CHILD_OPTIONS, PARTITIONS, KillLoop
from tests.test_executor import spawn_child
from tests.test_executor_exactly_once import read_committed

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.fixture
def own_broker() -> Iterator[LocalKafkaBroker]:
    """A broker of this test alone, since it is restarted."""
    with LocalKafkaBroker() as broker:
        yield broker


def no_open_transaction(bootstrap: str, topic: str, partitions: int) -> Callable[[], bool]:
    """Whether every transaction on ``topic`` has ended (its last stable offset is its end)."""
    def check() -> bool:
        committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        uncommitted = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            return committed.end_offsets(tps) == uncommitted.end_offsets(tps)
        finally:
            committed.close()
            uncommitted.close()
    return check


@over_families("exactly_once", argname="client")
def test_exactly_once_across_kills_and_a_broker_restart(
    own_broker: LocalKafkaBroker, unique_name: Callable[[str], str], tmp_path: Path,
    faults_full: bool, fault_report: Any, client: str,
) -> None:
    """SIGKILL of the exactly-once executor 3 times (12 with --faults-full) and one broker
    restart while producing, then a final run: the read_committed output holds every
    acknowledged input once."""
    kills, count, rate = (12, 30000, 800) if faults_full else (3, 3000, 400)
    bootstrap = own_broker.bootstrap_servers
    topic, group, out_topic = unique_name("eos"), unique_name("g"), unique_name("eos-out")
    create_priority_topics(bootstrap, topic, LEVELS, num_partitions=PARTITIONS)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(out_topic, num_partitions=PARTITIONS,
                                      replication_factor=1)])
    finally:
        admin.close()
    out = tmp_path / "handled.txt"
    out.touch()
    options = (*CHILD_OPTIONS, "--exactly-once", out_topic)
    loop = KillLoop(out, lambda: spawn_child(bootstrap, topic, group, out, levels=LEVELS,
                                             client=client, extra=options))
    tally = Tally()
    producing = Producing(bootstrap, topic, tally, rate=rate, limit=count,
                          retries=2**31 - 1, delivery_timeout_ms=300_000)
    restart_s: list[float] = []

    def restart_once(run: int) -> None:
        if run == kills // 2:  # the broker dies under the running executor and comes back
            down = time.monotonic()
            own_broker.restart(kill=True)
            restart_s.append(time.monotonic() - down)
            back = len(loop.lines())
            loop.wait(lambda: len(loop.lines()) > back + 100, 120,
                      f"handling after the broker restart (down {restart_s[-1]:.1f} s)")

    try:
        loop.run(kills, during=restart_once)
        loop.finish(producing, tally)
    finally:
        loop.close()
    # The last run committed on its way out; transactions of killed runs were aborted when
    # the next run's producer (same transactional id) started.
    wait_for(no_open_transaction(bootstrap, out_topic, PARTITIONS), 60,
             "every transaction on the output to end")
    output = Counter({
        value.decode(): n for value, n in read_committed(bootstrap, out_topic, PARTITIONS).items()
    })
    handled = Counter(loop.lines())
    figures = {
        "produced": len(tally.acked), "send_failures": len(tally.failed),
        "handled": sum(handled.values()), "handled_more_than_once": sum(handled.values())
        - len(handled), "output_lost": len(tally.acked - output.keys()),
        "output_duplicates": sum(output.values()) - len(output),
        "output_unexpected": len(output.keys() - tally.sent.keys()), "kills": kills,
        "broker_restarts": len(restart_s), "broker_down_s": round(sum(restart_s), 1),
    }
    fault_report(f"exactly-once crash loop and broker restart ({client})", **figures)
    assert figures["produced"] == count
    assert figures["output_lost"] == 0 and figures["output_duplicates"] == 0
    assert figures["output_unexpected"] == 0
