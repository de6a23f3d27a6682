"""What the fault scenarios share: traffic of ``level:key:seq`` records (benchmarks._traffic:
the producer and the tally) sent while a fault happens, and the executor handling it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks._running import Running, wait_for
from benchmarks._traffic import LEVELS, Producing, Tally, harnessed
from priority_kafka import create_priority_topics
from priority_kafka.executor import ShardedExecutor
from priority_kafka.families import family as registered
from tests.faults.on_loop import OnLoop
from tests.test_executor import priority_consumer


class Load:
    """One family's traffic under :func:`under_load`: its tally and its producer."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.producing: Producing | None = None

    def figures(self) -> dict[str, Any]:
        """The tally's figures and the produce errors the producer retried, by name."""
        retried = self.producing.retried_errors if self.producing is not None else {}
        return {**self.tally.figures(), "retried_errors": retried}


@contextlib.contextmanager
def under_load(
    bootstrap: str, name: str, rate: float = 300, client: str = "kafka-python",
    producer_configs: dict[str, Any] | None = None, producer_client: str = "kafka-python",
    sync_handler: bool = False, **client_configs: Any,
) -> Iterator[Load]:
    """Produce to a keyed 3-level topic (2 partitions per level) and handle it with a
    ShardedExecutor over a PriorityConsumer of ``client`` (kafka-python, or confluent through
    its executor adapter, with ``run()`` on a thread; a family whose consumer lives on the
    caller's loop, aiokafka, with ``run_async()`` and an ``async def`` handler in a loop of its
    own thread: :class:`~tests.faults.on_loop.OnLoop`; with ``sync_handler``, a plain ``def``
    handler, which ``run_async()`` runs on the worker threads); the block runs once records
    flow; then producing stops and every acknowledged record must be handled.

    The producer is ``producer_client``'s PriorityProducer. ``client_configs`` go to the
    kafka-python clients, ``producer_configs`` to a kafka-python producer only (``acks="all"``
    on a replicated topic; the confluent one always has it). The topic is created here unless
    it exists (a replicated one created by the caller)."""
    topic, group = name, f"{name}-g"
    create_priority_topics(bootstrap, topic, LEVELS, num_partitions=2)
    load = Load(Tally())
    tally = load.tally
    options: dict[str, Any] = {
        "shards": 4, "commit_interval_ms": 200, "max_in_flight_per_partition": 500,
    }
    run: Running | OnLoop
    if registered(client).caller_loop:

        def handle(record: Any) -> None:
            tally.handle(record.value.decode(), record.partition)

        async def handle_on_loop(record: Any) -> None:
            handle(record)

        run = OnLoop(lambda: loop_consumer(bootstrap, topic, group, **client_configs),
                     handle if sync_handler else handle_on_loop, **options)
    else:
        run = Running(ShardedExecutor(
            client_consumer(client, bootstrap, topic, group, **client_configs),
            lambda record: tally.handle(record.value.decode(), record.partition), **options,
        ))
    try:
        load.producing = producing = Producing(
            bootstrap, topic, tally, rate=rate, client=producer_client,
            **({**client_configs, **(producer_configs or {})}
               if not harnessed(producer_client).librdkafka else {}),
        )
        try:
            wait_for(lambda: tally.handled_count() >= rate, 90, "the executor to start handling")
            yield load
        finally:
            producing.stop()
        wait_for(tally.all_acked_handled, 120, "every acknowledged record to be handled")
    finally:
        run.stop()
    assert run.error is None


def run_under_load(
    bootstrap: str, name: str, fault: Callable[[Tally], dict[str, Any]], rate: float = 300,
    client: str = "kafka-python", producer_configs: dict[str, Any] | None = None,
    producer_client: str = "kafka-python", sync_handler: bool = False, **client_configs: Any,
) -> dict[str, Any]:
    """:func:`under_load`, calling ``fault(tally)`` once records flow. Returns the figures
    (:meth:`Load.figures`) and what ``fault`` returned."""
    with under_load(bootstrap, name, rate, client, producer_configs, producer_client,
                    sync_handler, **client_configs) as load:
        extra = fault(load.tally)
    return {**load.figures(), **extra}


def loop_consumer(
    bootstrap: str, topic: str, group: str, max_poll_records: int = 100, **configs: Any,
) -> Any:
    """:func:`client_consumer` for a family whose consumer lives on the caller's loop: the aio
    PriorityConsumer of ``topic``, built on the running loop (``configs``: aiokafka's)."""
    from priority_kafka.aio import PriorityConsumer as AioPriorityConsumer

    return AioPriorityConsumer(
        topic, max_priority=LEVELS, bootstrap_servers=bootstrap, group_id=group,
        enable_auto_commit=False, auto_offset_reset="earliest",
        max_poll_records=max_poll_records, **configs,
    )


def client_consumer(
    client: str, bootstrap: str, topic: str, group: str, max_poll_records: int = 100,
    **configs: Any,
) -> Any:
    """An executor's PriorityConsumer of ``topic`` on ``client``, subscribed, from the start
    of ``topic``, without auto-commit; ``configs`` go to the kafka-python one."""
    if not harnessed(client).librdkafka:
        return priority_consumer(
            bootstrap, topic, group, max_poll_records=max_poll_records, **configs
        )
    from priority_kafka.executor._clients import as_client
    from tests.confluent.helpers import consumer

    # Subscribed through the executor's client: a confluent consumer cannot tell the executor
    # what it subscribed to.
    client = as_client(consumer(bootstrap, group, **{
        "max.poll.records": max_poll_records, "enable.auto.commit": False,
    }))
    client.subscribe([topic])
    return client
