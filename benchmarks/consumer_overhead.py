"""Overhead of a PriorityConsumer over its raw client reading the same three topics.

The same pre-loaded records (100 B, spread evenly over the three priority topics of one
logical topic) are read to the end, on each client family ``--client`` names (default both):

- kafka-python: a raw ``KafkaConsumer`` subscribed to the three topics and
  :class:`priority_kafka.PriorityConsumer` (``max_poll_records`` 500 in total for both unless
  ``--max-poll-records``, kafka-python's default fetch settings, no auto-commit), each polling
  ``poll(timeout_ms=100)``;
- confluent: a raw ``confluent_kafka.Consumer`` subscribed to the three topics and
  :class:`priority_kafka.confluent.PriorityConsumer` (``max.poll.records`` the same 500), each
  calling ``consume(500, 1.0)``, librdkafka's defaults otherwise.

Every read has a fresh consumer group and is timed from its first poll (so the group joins are
included: one group for a raw consumer, one per level for a PriorityConsumer) to the poll that
returns the last record. Each read runs in a fresh process; all contenders
(``<client>/priority``, ``<client>/raw``) take turns, ``--rounds`` rounds (in the order given in
even rounds, reversed in odd ones), because the machine is shared. Target per client:
``ratio`` (the median over the rounds of PriorityConsumer / raw records/s of the same round)
>= 0.9; ``ratio_per_round``, its min and max beside it. Also reported: the same ratios once
records flow (``steady``), per CPU second of the reading process (``per_cpu_second``, less
sensitive to the other processes on the machine) and per CPU second once records flow
(``steady_per_cpu_second``); the load average before every read is under ``interleaving``.

Until issue 21 the confluent half was ``benchmarks.confluent_consumer``: ``confluent_consumer
--rounds 5`` is now ``consumer_overhead --client confluent --rounds 5`` (the same reads), and
``consumer_overhead --rounds 5`` of before is ``--client kafka-python``.

    .venv/bin/python -m benchmarks.consumer_overhead [--client kafka-python|confluent|both]
        [--smoke] [--records N] [--rounds R] [--max-poll-records N]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from benchmarks._clients import add_client_argument, clients_of, interleave_clients
from benchmarks._common import parse_args, preloaded_levels, write_result
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, drain_comparison, read_levels

NAME = "consumer_overhead"
RECORD_SIZE = 100


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=5, help="reads per consumer")
    parser.add_argument(
        "--max-poll-records", type=int, default=MAX_POLL_RECORDS, help="per poll, every consumer"
    )
    add_client_argument(parser)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    rounds = 1 if args.smoke else args.rounds
    clients = clients_of(args)
    with preloaded_levels(args, "overhead", MAX_PRIORITY, RECORD_SIZE) as loaded:
        runs = interleave_clients(
            read_levels, ("priority", "raw"), clients, rounds,
            bootstrap_servers=loaded.servers, topic=loaded.topic, total=loaded.total,
            max_poll_records=args.max_poll_records,
        )
    result = {
        "records": loaded.total,
        "record_size": RECORD_SIZE,
        "max_poll_records": args.max_poll_records,
        "rounds": rounds,
        "smoke": args.smoke,
        "clients": clients,
        **{
            client: drain_comparison(runs, f"{client}/priority", f"{client}/raw")
            for client in clients
        },
        "interleaving": runs.summary(),
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
