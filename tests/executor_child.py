"""A ShardedExecutor in its own process, for the crash and signal tests of tests/test_executor.py
and the crash loop of tests/faults.

Usage: python tests/executor_child.py BOOTSTRAP TOPIC GROUP OUT_FILE INSTANCE_ID [LEVELS]
Appends ``partition offset`` for every record it handles to OUT_FILE (one ``write`` per line,
so a kill -9 never leaves half a line), and stops gracefully on SIGTERM/SIGINT. With LEVELS,
it consumes the priority topics of TOPIC through a PriorityConsumer and appends each record's
value instead.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from kafka import KafkaConsumer

from priority_kafka import PriorityConsumer
from priority_kafka.executor import ShardedExecutor

#: Settings the parent test uses to bound the duplicates a crash may cause.
SHARDS = 8
MAX_IN_FLIGHT = 200
MAX_POLL_RECORDS = 100
COMMIT_INTERVAL_MS = 100
HANDLER_S = 0.002


def main(
    bootstrap: str, topic: str, group: str, out: str, instance_id: str, levels: str = "0"
) -> None:
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    configs = {
        "bootstrap_servers": bootstrap, "group_id": group, "group_instance_id": instance_id,
        "enable_auto_commit": False, "auto_offset_reset": "earliest",
        "session_timeout_ms": 10000, "max_poll_records": MAX_POLL_RECORDS,
    }
    consumer: Any
    if int(levels):
        consumer = PriorityConsumer(topic, max_priority=int(levels), **configs)
    else:
        consumer = KafkaConsumer(topic, **configs)

    def handler(record: Any) -> None:
        time.sleep(HANDLER_S)
        line = record.value.decode() if int(levels) else f"{record.partition} {record.offset}"
        os.write(fd, f"{line}\n".encode())

    executor = ShardedExecutor(
        consumer, handler, shards=SHARDS, max_in_flight_per_partition=MAX_IN_FLIGHT,
        commit_interval_ms=COMMIT_INTERVAL_MS,
    )
    print("ready", flush=True)
    executor.run(handle_signals=True)
    os.close(fd)


if __name__ == "__main__":
    main(*sys.argv[1:7])
