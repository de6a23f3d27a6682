"""An asyncio service whose lifespan runs the ShardedExecutor on its own loop (docs/asyncio.md).

The lifespan starts a :class:`priority_kafka.aio.PriorityConsumer` and enters
``async with ShardedExecutor(...)``: the executor runs as a task of the service's loop, the
``async def`` handler as tasks there (at most ``async_concurrency`` at once, one at a time per
key), and on the way out it is stopped, drained, committed and the consumer closed. Meanwhile
the service produces 300 orders over 10 customers (the key) on three priority levels and waits
until all were handled.

    KAFKA_BOOTSTRAP=localhost:9092 python examples/asyncio_executor.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from typing import Any

from priority_kafka import ShardedExecutor, create_priority_topics
from priority_kafka.aio import PriorityConsumer, PriorityProducer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
TOPIC = f"orders-{uuid.uuid4().hex[:8]}"  # a fresh logical topic per run
ORDERS = 300


class Service:
    """What the application keeps: orders handled by level, and each customer's order numbers
    per level (key order holds within a level's partition)."""

    def __init__(self) -> None:
        self.handled: Counter[int] = Counter()
        self.sequences: dict[tuple[int, bytes], list[int]] = defaultdict(list)
        self.all_handled = asyncio.Event()

    async def handle(self, record: Any) -> None:
        """The executor's handler: an ``async def``, so a task of the service's loop."""
        await asyncio.sleep(0.005)  # the application's own async I/O would go here
        level = int(record.topic.rsplit("-", 1)[1])
        self.sequences[level, record.key].append(int(record.value))
        self.handled[level] += 1
        if sum(self.handled.values()) == ORDERS:
            self.all_handled.set()


@contextlib.asynccontextmanager
async def lifespan(service: Service) -> AsyncIterator[None]:
    consumer = PriorityConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=f"{TOPIC}-app", max_priority=3,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    await consumer.start()
    executor = ShardedExecutor(consumer, service.handle, async_concurrency=50)
    async with executor:
        print("lifespan: executor running on the service's loop")
        yield
    stats = executor.stats()
    print(f"lifespan: executor drained, committed and closed ({stats.handled} handled)")


async def main() -> None:
    create_priority_topics(BOOTSTRAP, TOPIC, 3)
    service = Service()
    async with lifespan(service):
        async with PriorityProducer(bootstrap_servers=BOOTSTRAP, max_priority=3) as producer:
            for n in range(ORDERS):
                customer = f"customer-{n % 10}".encode()
                await producer.send(TOPIC, str(n).encode(), key=customer, priority=n % 3)
        print(f"produced {ORDERS} orders on 3 levels")
        await asyncio.wait_for(service.all_handled.wait(), 120)
    in_order = all(seq == sorted(seq) for seq in service.sequences.values())
    print(f"handled {dict(sorted(service.handled.items(), reverse=True))}, "
          f"each customer's orders in order: {in_order}")


if __name__ == "__main__":
    asyncio.run(main())
