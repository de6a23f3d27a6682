"""Reproduction: a plain kafka-python consumer polled with short timeouts stalls in a rebalance.

Two bugs of kafka-python 3.0.12's join loop (``coordinator/base.py``, ``join_group_async``),
one case each (``--case``):

- ``added``: the loop runs ``while need_rejoin()``; Java's runs while a rejoin is needed *or a
  join is pending*. When partitions are added to a subscribed topic, the rejoin that follows
  raises no flag: ``need_rejoin()`` is True only while the leader's assignment snapshot differs
  from the metadata, and the leader's own assignment (inside the pending join task) makes them
  equal. A ``poll()`` that returned before the task finished never awaits it: the consumer
  stays REBALANCING with its old partitions, forever and silently. Each trial: one consumer
  (group of one, ``metadata_max_age_ms=1000``) joins a one-partition topic, a second partition
  is added and a record produced to it, and the consumer is polled with ``--poll-ms`` (0 by
  default) until that record arrives or ``--wait-s`` pass.
- ``finished``: a join task that finished while no poll awaited it is replaced by a new
  JoinGroup (``if self._join_task is None or self._join_task.is_done``), so its assignment is
  never applied. Each trial: one consumer joins a fresh group polled with ``timeout_ms=0``
  every 10 ms until it has an assignment or ``--wait-s`` pass. It joins, but only when a
  SyncGroup answer happens to arrive inside a poll: the generation it reached counts the join
  rounds it started (measured: 9, 88 and 283 rounds plain, 2 with the work-around).

Modes:

- ``plain``: kafka-python alone (stalls),
- ``workaround``: what a PriorityConsumer level does (``priority_kafka.kafka_python._kafka``):
  after every poll, ``keep_pending_join`` keeps a pending join from being forgotten and hands
  a finished one to the next poll; in the ``added`` case, while the group is unsettled the next poll
  blocks ``JOIN_POLL_MS`` as a level's does.

The day ``plain`` stops stalling on a new kafka-python release, ``_kafka.FORGETS_PENDING_JOIN``
or ``_kafka.REPLACES_FINISHED_JOIN`` gets an upper bound and its work-around goes.
``tests/test_kafka_edge.py`` runs trials of each.

    .venv/bin/python -m benchmarks.kafka_python_join_stall [--smoke] [--case added|finished]
        [--trials N] [--poll-ms MS]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions

from benchmarks._code import library_module
from benchmarks._common import broker, create_topics, parse_args, unique, write_result

# The kafka-python edge of the priority_kafka being measured (its path moved in issue 38).
_edge = library_module("priority_kafka.kafka_python._kafka")
JOIN_POLL_MS = _edge.JOIN_POLL_MS
KAFKA_PYTHON_VERSION = _edge.KAFKA_PYTHON_VERSION
group_progress = _edge.group_progress
keep_pending_join = _edge.keep_pending_join

NAME = "kafka_python_join_stall"
MODES = ("plain", "workaround")
CASES = ("added", "finished")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", choices=CASES, default="added", help="which bug to show")
    parser.add_argument("--trials", type=int, default=5, help="trials per mode")
    parser.add_argument("--poll-ms", type=int, default=0, help="poll timeout after joining")
    parser.add_argument("--wait-s", type=float, default=20.0, help="when a trial is stalled")


def trial(bootstrap_servers: str, mode: str, *, poll_ms: int = 0, wait_s: float = 20.0) -> dict:
    """One trial: seconds until a record of the added partition arrived (None: stalled)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    topic = unique("join-stall")
    create_topics(bootstrap_servers, [topic])
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=unique("g"),
        metadata_max_age_ms=1000,
        auto_offset_reset="earliest",
    )
    try:
        # The first join is not what this shows: give it blocking polls.
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            admin.create_partitions({topic: NewPartitions(total_count=2)})
        finally:
            admin.close()
        _produce_to_new_partition(bootstrap_servers, topic)
        added = TopicPartition(topic, 1)
        start = time.monotonic()
        seconds = None
        timeout_ms = poll_ms
        while time.monotonic() - start < wait_s:
            records = consumer.poll(timeout_ms=timeout_ms)
            if added in records:
                seconds = round(time.monotonic() - start, 2)
                break
            if mode == "workaround":
                timeout_ms = _workaround(consumer, poll_ms)
            if not timeout_ms:
                time.sleep(0.01)  # a zero-timeout loop with something else to do
        membership = group_progress(consumer)
        positions = {
            tp.partition: consumer.position(tp, timeout_ms=2000) for tp in consumer.assignment()
        }
        return {
            "mode": mode,
            "poll_ms": poll_ms,
            "seconds_to_added_partition": seconds,
            "stalled": seconds is None,
            "group_state": membership[1][0] if membership else None,
            "positions": positions,
        }
    finally:
        consumer.close()


def join_trial(bootstrap_servers: str, mode: str, *, wait_s: float = 20.0) -> dict:
    """One ``finished`` trial: seconds until a zero-timeout poll loop joined (None: stalled)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    topic = unique("join-finished")
    create_topics(bootstrap_servers, [topic])
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=unique("g"))
    try:
        start = time.monotonic()
        seconds = None
        while time.monotonic() - start < wait_s:
            consumer.poll(timeout_ms=0)
            if consumer.assignment():
                seconds = round(time.monotonic() - start, 2)
                break
            if mode == "workaround":
                keep_pending_join(consumer)
            time.sleep(0.01)
        meta = consumer.group_metadata()
        return {
            "mode": mode,
            "seconds_to_join": seconds,
            "stalled": seconds is None,
            "generation": meta.generation_id,
        }
    finally:
        consumer.close()


def _workaround(consumer: KafkaConsumer, poll_ms: int) -> int:
    """What a PriorityConsumer level does after each poll; returns the next poll's timeout."""
    keep_pending_join(consumer)
    membership = group_progress(consumer)
    return JOIN_POLL_MS if membership is not None and not membership[0] else poll_ms


def _produce_to_new_partition(bootstrap_servers: str, topic: str) -> None:
    # A fresh producer: one that already knows the topic refuses the new partition until its
    # own metadata refresh.
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    try:
        deadline = time.monotonic() + 30
        while 1 not in (producer.partitions_for(topic) or ()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"partition 1 of {topic} never appeared in metadata")
            time.sleep(0.2)
        producer.send(topic, b"added", partition=1).get(timeout=30)
    finally:
        producer.close()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    trials = 1 if args.smoke else args.trials
    wait_s = 10.0 if args.smoke else args.wait_s
    runs: list[dict] = []
    with broker(args) as servers:
        for _ in range(trials):
            for mode in MODES:
                if args.case == "added":
                    runs.append(trial(servers, mode, poll_ms=args.poll_ms, wait_s=wait_s))
                else:
                    runs.append(join_trial(servers, mode, wait_s=wait_s))
                print(runs[-1])
    seconds = "seconds_to_added_partition" if args.case == "added" else "seconds_to_join"
    summary = {
        mode: {
            "trials": sum(r["mode"] == mode for r in runs),
            "stalled": sum(r["mode"] == mode and r["stalled"] for r in runs),
            "seconds": [r[seconds] for r in runs if r["mode"] == mode],
            "generations": [r.get("generation") for r in runs if r["mode"] == mode],
        }
        for mode in MODES
    }
    result = {
        "kafka_python": ".".join(map(str, KAFKA_PYTHON_VERSION)),
        "case": args.case,
        "poll_ms": args.poll_ms,
        "wait_s": wait_s,
        "summary": summary,
        "runs": runs,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
