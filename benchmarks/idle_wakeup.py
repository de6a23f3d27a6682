"""Idle CPU of a poll loop waiting 1 s, and wake-up latency: PriorityConsumer vs its raw client.

Idle CPU: once its group(s) joined (and a settling second), a consumer subscribed to empty
topics runs a poll loop for ``--idle-seconds`` (10 s): ``poll(timeout_ms=1000)`` on kafka-python,
``poll(1.0)`` on confluent-kafka; reported as process CPU time (``time.process_time()``, every
thread: the poll loop, the client's I/O threads, heartbeats) over wall time, in % of one core.
A PriorityConsumer (3 levels, one client consumer each) vs the client's raw consumer on one
topic, on each client family ``--client`` names (default both); target < 2% for a
PriorityConsumer.

Wake-up latency: the same consumers keep waiting in that poll while a producer thread (no
linger: kafka-python's ``KafkaProducer`` or librdkafka's ``Producer``, the consumer's family)
sends one record every 50-150 ms (uniformly random, so arrivals fall at any point of the
consumer's wait) carrying its send time; latency is that send call to the return of the poll
that delivered it. Measured for a PriorityConsumer's highest level (target p99 < 50 ms), its
lowest level (checked every 100-400 ms on kafka-python, every 50 ms on confluent, while it waits
on the highest, so expect up to a slice more), and the raw consumer; ratios are against the raw
consumer of the same client.

Each side's run (idle CPU, then its wake-ups, on topics of its own) is a fresh process, so the
process CPU time is that consumer's alone; the contenders (``<client>/priority``,
``<client>/raw``) take turns for ``--rounds`` rounds (in order in even rounds, reversed in odd
ones). Per client, ``idle`` has each side's median and per-round CPU, ``idle_cpu_ratio`` the
median over the rounds of priority / raw CPU of the same round (``idle_cpu_per_round``: every
round's ratio, min, max); the wake-up latencies pool every round's samples (``wakeup``, the
targets and the plot: ``wakeup_cdf.png`` on kafka-python, ``confluent_wakeup_cdf.png`` on
confluent), while ``wakeup_p99_ratio`` is the median of the per-round p99 ratios
(``wakeup_p99_per_round``). The load average before every run is under ``interleaving``.

Until issue 21 the confluent half was ``benchmarks.confluent_idle``: ``confluent_idle --rounds
3`` is now ``idle_wakeup --client confluent --rounds 3``, and ``idle_wakeup --rounds 3`` of
before is ``--client kafka-python``.

    .venv/bin/python -m benchmarks.idle_wakeup [--client kafka-python|confluent|both] [--smoke]
        [--idle-seconds S] [--samples N] [--rounds R]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._clients import add_client_argument, clients_of, interleave_clients, plot_name
from benchmarks._code import family
from benchmarks._common import broker, create_topics, parse_args, unique, write_result
from benchmarks._consumers import (
    MAX_PRIORITY,
    Pacer,
    confluent_consumer,
    low_latency_producer,
    priority_consumer,
    raw_consumer,
    stamp_of,
)
from benchmarks._idle import SIDES, add_arguments, idle_summary, side_result
from priority_kafka import create_priority_topics, priority_topic

NAME = "idle_wakeup"
_POLL_TIMEOUT_S = 1.0
_SETTLE_S = 1.0
#: How a client's consumers and poll are named in its plot, by whether it is librdkafka's
#: (Family.librdkafka): kafka-python's calls, librdkafka's.
_LABELS = (
    ("PriorityConsumer", "raw KafkaConsumer", "poll(timeout_ms=1000)"),
    ("confluent PriorityConsumer", "raw confluent Consumer", "poll(1.0)"),
)

#: One poll of a consumer waiting up to the given seconds: the values it returned.
Poll = Callable[[float], list[bytes]]


def _open(client: str, side: str, servers: str, topics: Sequence[str]) -> tuple[Any, Poll]:
    """``side``'s consumer on ``client``, subscribed to ``topics`` (a PriorityConsumer to the
    logical ``topics[0]``), and its poll. Error events of a confluent poll count as nothing."""
    if not family(client).librdkafka:
        if side == "raw":
            consumer = raw_consumer(servers, topics, enable_auto_commit=True)
        else:
            consumer = priority_consumer(servers, topics[0], enable_auto_commit=True)

        def poll(timeout_s: float) -> list[bytes]:
            batch = consumer.poll(timeout_ms=int(timeout_s * 1000))
            return [record.value for records in batch.values() for record in records]

        return consumer, poll
    consumer = confluent_consumer(
        servers, topics, levels=side == "priority", **{"auto.offset.reset": "latest"}
    )

    def poll_message(timeout_s: float) -> list[bytes]:
        message = consumer.poll(timeout_s)
        return [] if message is None or message.error() is not None else [message.value()]

    return consumer, poll_message


def _settle(consumer: Any, poll: Poll, partitions: int, timeout_s: float = 30.0) -> None:
    """Poll until ``partitions`` partitions are assigned, then a little longer."""
    deadline = time.monotonic() + timeout_s
    while len(consumer.assignment()) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not assigned {partitions} partitions within {timeout_s:g} s")
        # A blocking poll: kafka-python 3 finishes a group join only inside a poll long enough
        # for it (priority_kafka.kafka_python._kafka.JOIN_NEEDS_BLOCKING_POLL); with 0.1 s polls
        # the raw consumer had no assignment within 30 s in a CI run under load.
        if poll(_POLL_TIMEOUT_S):
            raise AssertionError("records arrived before the benchmark sent any")
    settled = time.monotonic() + _SETTLE_S
    while time.monotonic() < settled:
        poll(0.1)


def _idle_cpu_percent(poll: Poll, seconds: float) -> dict[str, float]:
    """CPU of the process while the consumer idles in a 1 s poll, % of a core."""
    polls = 0
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - start_wall < seconds:
        if poll(_POLL_TIMEOUT_S):
            raise AssertionError("an idle consumer returned records")
        polls += 1
    wall = time.perf_counter() - start_wall
    cpu = time.process_time() - start_cpu
    return {"cpu_percent": 100 * cpu / wall, "cpu_seconds": cpu, "wall_seconds": wall,
            "polls": polls}


def _wakeups(poll: Poll, producer: Any, topic: str, samples: int, seed: int) -> list[float]:
    """Latencies (s) of ``samples`` records sent to ``topic`` while the consumer waits in poll."""
    rng = random.Random(seed)
    pacer = Pacer(producer, topic, lambda: rng.uniform(0.05, 0.15))
    latencies: list[float] = []
    deadline = time.monotonic() + 60 + samples * 0.5
    sent: int | None = None
    pacer.start()
    try:
        # After the last sample, the records still in flight are read too (and counted), so
        # none is left behind for the next measurement.
        while sent is None or len(latencies) < sent:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(latencies)} of {samples} wake-ups arrived")
            values = poll(_POLL_TIMEOUT_S)
            returned = time.perf_counter()
            latencies.extend(returned - stamp_of(value) for value in values)
            if sent is None and len(latencies) >= samples:
                sent = pacer.finish()
    finally:
        pacer.finish_if_running()
    return latencies


def run_side(
    client: str, side: str, bootstrap_servers: str, idle_s: float, samples: int
) -> dict[str, Any]:
    """Contender: one side's idle CPU, then its wake-up latencies, on topics of its own.

    ``side`` "raw": ``client``'s raw consumer on one topic; "priority": a PriorityConsumer over
    ``MAX_PRIORITY`` levels, wake-ups measured on its highest and then its lowest level.
    """
    if side == "raw":
        topic = unique("idle-raw")
        create_topics(bootstrap_servers, [topic])
        partitions, targets = 1, {"raw": (topic, 1)}
    else:
        topic = unique("idle")
        create_priority_topics(bootstrap_servers, topic, MAX_PRIORITY)
        partitions = MAX_PRIORITY
        targets = {
            "priority_highest": (priority_topic(topic, MAX_PRIORITY - 1), MAX_PRIORITY - 1),
            "priority_lowest": (priority_topic(topic, 0), 0),
        }
    consumer, poll = _open(client, side, bootstrap_servers, [topic])
    latencies: dict[str, list[float]] = {}
    try:
        _settle(consumer, poll, partitions)
        idle = _idle_cpu_percent(poll, idle_s)
        producer = low_latency_producer(bootstrap_servers, client)
        try:
            for name, (target, seed) in targets.items():
                latencies[name] = _wakeups(poll, producer, target, samples, seed=seed)
        finally:
            producer.close()
    finally:
        consumer.close()
    return side_result(idle, latencies)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_arguments(parser)
    add_client_argument(parser)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    idle_s = 1.5 if args.smoke else args.idle_seconds
    samples = 10 if args.smoke else args.samples
    rounds = 1 if args.smoke else args.rounds
    clients = clients_of(args)
    with broker(args) as servers:
        runs = interleave_clients(
            run_side, SIDES, clients, rounds,
            bootstrap_servers=servers, idle_s=idle_s, samples=samples,
        )
    summaries = {}
    for client in clients:
        priority, raw, call = _LABELS[family(client).librdkafka]
        summaries[client] = idle_summary(
            runs, client, args.out / plot_name("wakeup_cdf", client),
            {
                "priority_highest": f"{priority}, highest level",
                "priority_lowest": f"{priority}, lowest level",
                "raw": raw,
            },
            f"Wake-up latency: send to {call} return ({rounds} rounds)",
        )
    result = {
        "idle_seconds": idle_s,
        "poll_timeout_s": _POLL_TIMEOUT_S,
        "samples": samples,
        "rounds": rounds,
        "smoke": args.smoke,
        "clients": clients,
        **summaries,
        "interleaving": runs.summary(),
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
