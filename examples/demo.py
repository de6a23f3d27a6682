"""The main job: priority consumption with key-ordered parallel handling, on a real broker.

A backlog of low-priority work sits in ``orders-0`` when urgent orders start arriving in
``orders-2``. A ``PriorityConsumer`` feeds a ``ShardedExecutor`` (16 workers, per-key order);
the urgent orders are handled within milliseconds while the backlog drains, and every record is
handled and committed. Run: ``bash scripts/dev.sh demo`` (starts a local Apache Kafka broker),
or ``python examples/demo.py --bootstrap-servers HOST:PORT``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
from kafka import TopicPartition

from priority_kafka import (
    PriorityConsumer,
    PriorityProducer,
    ShardedExecutor,
    create_priority_topics,
)
from priority_kafka.testing import local_kafka

BACKLOG = {0: 20_000, 1: 2_000}
URGENT = 200
URGENT_RATE = 100.0  # urgent orders per second
WORK_S = 0.005  # an I/O-like handler: 5 ms per order


@contextlib.contextmanager
def broker(bootstrap_servers: str | None) -> Iterator[str]:
    if bootstrap_servers:
        yield bootstrap_servers
        return
    print("starting a local Apache Kafka broker ...", flush=True)
    with local_kafka() as local:
        print(f"broker ready at {local.bootstrap_servers}", flush=True)
        yield local.bootstrap_servers


def send_urgent(producer: PriorityProducer, topic: str) -> None:
    for i in range(URGENT):
        producer.send(topic, f"urgent-{i}".encode(), key=f"customer-{i % 20}".encode(), priority=2)
        time.sleep(1 / URGENT_RATE)
    producer.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", help="use this broker instead of a local one")
    args = parser.parse_args()
    with broker(args.bootstrap_servers) as servers:
        topic = f"orders-{uuid.uuid4().hex[:6]}"
        create_priority_topics(servers, topic, max_priority=3, num_partitions=2)
        producer = PriorityProducer(bootstrap_servers=servers, max_priority=3, linger_ms=10)
        for level, count in BACKLOG.items():
            for i in range(count):
                producer.send(topic, b"x" * 100, key=f"customer-{i % 500}".encode(), priority=level)
        producer.flush()
        total = sum(BACKLOG.values()) + URGENT
        print(f"queued a backlog of {BACKLOG} records in {topic}-0/1; sending {URGENT} urgent")

        latencies: dict[int, list[float]] = defaultdict(list)
        lock = threading.Lock()
        done = threading.Event()

        def handle(record) -> None:  # type: ignore[no-untyped-def]
            time.sleep(WORK_S)
            level = int(record.topic.rsplit("-", 1)[1])
            with lock:
                latencies[level].append(time.time() * 1000 - record.timestamp)
                if sum(len(v) for v in latencies.values()) >= total:
                    done.set()

        consumer = PriorityConsumer(
            bootstrap_servers=servers, group_id=f"demo-{topic}", max_priority=3,
            max_poll_records=500, auto_offset_reset="earliest", enable_auto_commit=False,
        )
        executor = ShardedExecutor(
            consumer, handle, shards=16, ordering="key", close_consumer=False
        )
        executor.subscribe([topic])
        urgent = threading.Thread(target=send_urgent, args=(producer, topic), daemon=True)
        runner = threading.Thread(target=executor.run)
        start = time.monotonic()
        runner.start()
        # Urgent orders start once the backlog is being worked through.
        while not latencies[0] and runner.is_alive():
            time.sleep(0.05)
        urgent.start()
        deadline = time.monotonic() + 300
        while not done.wait(5):
            with lock:
                progress = {level: len(values) for level, values in sorted(latencies.items())}
            print(f"  handled so far: {progress}", flush=True)
            if time.monotonic() > deadline:
                executor.stop()
                raise SystemExit("the demo did not finish within 5 minutes")
        elapsed = time.monotonic() - start
        executor.stop()
        runner.join()
        urgent.join()
        partitions = [TopicPartition(f"{topic}-{lv}", p) for lv in range(3) for p in range(2)]
        ends = consumer.end_offsets(partitions)
        committed = {tp: consumer.committed(tp) or 0 for tp in partitions}
        consumer.close()
        producer.close()

    work_ms = WORK_S * 1000
    print(f"\nhandled {total} records in {elapsed:.1f} s, 16 workers, {work_ms:.0f} ms each\n")
    print(f"{'level':>5} {'records':>8} {'p50 ms':>9} {'p99 ms':>9}   (produce -> handled)")
    for level in sorted(latencies, reverse=True):
        values = np.array(latencies[level])
        print(f"{level:>5} {len(values):>8} {np.percentile(values, 50):>9.0f} "
              f"{np.percentile(values, 99):>9.0f}")
    lag = sum(ends[tp] - committed[tp] for tp in partitions)
    print(f"\ncommitted offsets reach the end of every partition: {lag == 0} (lag {lag})")
    if lag:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
