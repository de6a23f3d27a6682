"""A plain asyncio service whose lifespan starts and stops a priority consumer (docs/asyncio.md).

The service owns one event loop. Its lifespan (an async context manager, as FastAPI's
``lifespan=`` takes one) starts a :class:`priority_kafka.aio.PriorityConsumer` and the task
that consumes with it, and on the way out cancels that task, commits what was handled and
stops the consumer. Meanwhile the service produces 300 orders on three priority levels with a
:class:`priority_kafka.aio.PriorityProducer` and waits until all were handled.

    KAFKA_BOOTSTRAP=localhost:9092 python examples/asyncio_app.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator

from priority_kafka import create_priority_topics
from priority_kafka.aio import PriorityConsumer, PriorityProducer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
TOPIC = f"orders-{uuid.uuid4().hex[:8]}"  # a fresh logical topic per run


class Service:
    """What the application keeps between requests: what it handled, by level."""

    def __init__(self) -> None:
        self.handled: Counter[int] = Counter()
        self.all_handled = asyncio.Event()

    async def handle(self, level: int, value: bytes) -> None:
        await asyncio.sleep(0)  # the application's own async I/O would go here
        self.handled[level] += 1
        if sum(self.handled.values()) == 300:
            self.all_handled.set()


async def consume(service: Service, consumer: PriorityConsumer) -> None:
    """The consuming task: batches highest level first; commits what it handled."""
    while True:
        batch = await consumer.getmany(timeout_ms=500)
        for tp, records in batch.items():
            level = consumer.priority_of(tp.topic)
            for record in records:
                await service.handle(level, record.value)
        if batch:
            await consumer.commit()


@contextlib.asynccontextmanager
async def lifespan(service: Service) -> AsyncIterator[None]:
    """Start the priority consumer and its task; on the way out cancel the task, commit what
    was handled and stop the consumer."""
    consumer = PriorityConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=f"{TOPIC}-service", max_priority=3,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    await consumer.start()
    print(f"lifespan: consumer started on {TOPIC}-0..2")
    task = asyncio.create_task(consume(service, consumer))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.commit()
        await consumer.stop()
        print("lifespan: consumer committed and stopped")


async def main() -> None:
    create_priority_topics(BOOTSTRAP, TOPIC, 3)
    service = Service()
    async with lifespan(service):
        async with PriorityProducer(bootstrap_servers=BOOTSTRAP, max_priority=3) as producer:
            for n in range(300):
                await producer.send(TOPIC, f"order {n}".encode(), priority=n % 3)
            await producer.flush()
        print("produced 300 orders on 3 levels")
        await asyncio.wait_for(service.all_handled.wait(), 120)
    print("handled", dict(sorted(service.handled.items(), reverse=True)))


if __name__ == "__main__":
    asyncio.run(main())
