"""A share-group member SIGKILLed in the middle of an acquisition: what it acknowledged is
never delivered again (PriorityShareConsumer and ShareExecutor), the rest comes to the next
member."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from share_helpers import set_group_configs, share_consumer

from priority_kafka.confluent import PriorityProducer

pytestmark = pytest.mark.integration

CHILD = Path(__file__).with_name("share_member_child.py")
PRODUCED = 3000


@pytest.mark.parametrize("front", ["consumer", "executor"])
def test_a_killed_member_gets_none_of_its_acknowledged_records_delivered_again(
    bootstrap_servers: str, topic: str, unique_name: Any, front: str
) -> None:
    """The member acquires one producer batch far larger than its round quota (max.poll.records
    20), ACCEPTs 200 records, polls on without acknowledging more, and is SIGKILLed with most
    of its acquisition still buffered or running. None of the 200 comes again to the next
    member; every other record does. (Before the ACCEPTs of a level that was still handing
    out its acquisition were sent, all 200 came again.)"""
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3,
                                 "linger.ms": 200, "batch.size": 1 << 20})
    for i in range(PRODUCED):
        producer.produce(topic, f"0:{i}".encode(), priority=0)
    assert producer.flush(30) == 0
    producer.close()
    group = unique_name(f"killed-{front}")
    # A short lock: the killed member's unacknowledged records come back within seconds.
    set_group_configs(bootstrap_servers, [f"{group}-{level}" for level in range(3)],
                      {"share.auto.offset.reset": "earliest",
                       "share.record.lock.duration.ms": 2000})
    child = subprocess.Popen(
        [sys.executable, str(CHILD), front, bootstrap_servers, topic, group, "200"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line, f"the member exited ({child.wait()}) before it reported"
        report = json.loads(line)
    finally:
        child.kill()
        child.wait(30)
        if child.stdout:
            child.stdout.close()
    handled = set(report["handled"])
    assert len(handled) == 200, report
    if front == "consumer":
        # Still mid-acquisition when killed: more acquired than handed out.
        assert report["buffered"] > 0, report
    with share_consumer(bootstrap_servers, topic, group) as survivor:
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(seen.keys() - handled) < PRODUCED - len(handled):
            assert time.monotonic() < deadline, (
                f"the next member got {len(seen.keys() - handled)} of the "
                f"{PRODUCED - len(handled)} records "
                f"not acknowledged in 120 s")
            for message in survivor.poll(0.5):
                assert message.error() is None, message.error()
                seen[message.offset()] = message.delivery_count()
                survivor.acknowledge(message)
    again = sorted(handled & seen.keys())
    assert not again, (f"{len(again)} of the {len(handled)} records the killed member "
                       f"ACCEPTed were delivered again: {again[:10]}...")
    assert set(seen) == set(range(PRODUCED)) - handled
