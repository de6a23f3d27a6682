"""Distributor comparison: one mixed-priority workload under three distributors, burst on and off.

Workload (the same for every configuration, on fresh topics): a PriorityConsumer (3 levels,
``max_poll_records`` 100) whose handler costs ``--handler-us`` per record (1 ms, slept once per
batch: about 1,000 records/s at most) reads records arriving at level 0 at 600/s and level 1 at
400/s steadily, and at level 2 in bursts (1,000/s for the first second of every 4). Together
they offer ~1,250 records/s, more than the consumer handles, so the split decides who waits.

Configurations: ``ExponentialDistributor`` (reserved 14/28/58 of 100, lowest first),
``LinearDistributor`` (17/33/50) and ``WeightedDistributor([1, 1, 1])`` (33/33/34), each with
capacity burst on (defaults W=6, T=4) and off (W=T=100,000: no level ever qualifies within a
run). Per configuration and level: records/s handled and latency (record timestamp to handled)
p50/p99; the baseline is the exponential distributor with burst, measured in the same run.
``distributors.png`` plots both.

    .venv/bin/python -m benchmarks.distributors [--smoke] [--seconds S]
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from benchmarks._common import (
    broker,
    new_figure,
    parse_args,
    percentile,
    save_figure,
    unique,
    write_result,
)
from benchmarks._consumers import MAX_PRIORITY, priority_consumer, wait_assigned
from priority_kafka import (
    ExponentialDistributor,
    LinearDistributor,
    WeightedDistributor,
    create_priority_topics,
    priority_topic,
)

NAME = "distributors"
MAX_POLL_RECORDS = 100
#: Records/s per level while it sends; level 2 sends only during BURST_ON_S of every BURST_EVERY_S.
RATES = {0: 600.0, 1: 400.0, 2: 1000.0}
BURST_EVERY_S, BURST_ON_S = 4.0, 1.0
DISTRIBUTORS = {
    "exponential": ExponentialDistributor(),
    "linear": LinearDistributor(),
    "weighted 1:1:1": WeightedDistributor([1, 1, 1]),
}
BURST_OFF = {"max_poll_history_window_size": 100_000, "min_poll_window_maxout_threshold": 100_000}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=12.0, help="per configuration")
    parser.add_argument("--handler-us", type=float, default=1000.0, help="per record")


def _send(servers: str, topic: str, seconds: float, scale: float, stop: threading.Event) -> None:
    """Send the workload's arrivals for ``seconds``, on an absolute schedule per level."""
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5, acks=1)
    try:
        for level in RATES:
            producer.partitions_for(priority_topic(topic, level))
        started = time.perf_counter()
        due = dict.fromkeys(RATES, 0.0)
        while not stop.is_set():
            now = time.perf_counter() - started
            if now >= seconds:
                break
            for level, rate in RATES.items():
                if level == 2 and now % BURST_EVERY_S >= BURST_ON_S:
                    due[level] = now  # no catching up on the silent stretch
                    continue
                while due[level] <= now:
                    producer.send(priority_topic(topic, level), b"x" * 100)
                    due[level] += 1 / (rate * scale)
            stop.wait(0.005)
        producer.flush()
    finally:
        producer.close()


def _measure(servers: str, options: dict[str, Any], seconds: float, handler_s: float,
             scale: float) -> dict[str, Any]:
    """Run the workload once; per level: records/s and latency percentiles (ms)."""
    topic = unique("distributors")
    create_priority_topics(servers, topic, MAX_PRIORITY)
    consumer = priority_consumer(servers, topic, max_poll_records=MAX_POLL_RECORDS, **options)
    latencies: dict[int, list[float]] = {level: [] for level in RATES}
    try:
        wait_assigned(consumer, MAX_PRIORITY)
        stop = threading.Event()
        sender = threading.Thread(target=_send, args=(servers, topic, seconds, scale, stop),
                                  daemon=True)
        sender.start()
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            batch = consumer.poll(timeout_ms=50)
            count = sum(len(records) for records in batch.values())
            time.sleep(handler_s * count)  # the handler's work, once per batch
            now = time.time()
            for tp, records in batch.items():
                level = consumer.priority_of(tp.topic)
                latencies[level].extend(now - r.timestamp / 1000 for r in records)
        stop.set()
        sender.join()
    finally:
        consumer.close()
    elapsed = time.perf_counter() - started
    return {
        str(level): {
            "records_per_s": round(len(values) / elapsed, 1),
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
        }
        for level, values in sorted(latencies.items(), reverse=True)
    }


def _plot(results: dict[str, dict[str, Any]], path: Any) -> None:
    fig, (top, bottom) = new_figure(2, 1, figsize=(10, 7), sharex=True)
    names = list(results)
    width = 0.27
    colours = {"2": "tab:red", "1": "tab:orange", "0": "tab:blue"}
    for i, level in enumerate(("2", "1", "0")):
        xs = [n + (i - 1) * width for n in range(len(names))]
        top.bar(xs, [results[name][level]["records_per_s"] for name in names], width,
                label=f"level {level}", color=colours[level])
        bottom.bar(xs, [results[name][level]["p99_ms"] for name in names], width,
                   label=f"level {level}", color=colours[level])
    top.set_ylabel("records handled per second")
    top.set_title("one workload (levels 0/1 steady, level 2 in bursts) under each distributor")
    top.legend()
    bottom.set_yscale("log")
    bottom.set_ylabel("latency p99 (ms, log)")
    bottom.set_xticks(range(len(names)), names, rotation=20)
    save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    seconds = 2.0 if args.smoke else args.seconds
    scale = 0.25 if args.smoke else 1.0
    handler_s = args.handler_us / 1e6 / scale
    results: dict[str, dict[str, Any]] = {}
    with broker(args) as servers:
        for name, distributor in DISTRIBUTORS.items():
            for burst in (True, False):
                options = {"max_poll_records_distributor": distributor,
                           **({} if burst else BURST_OFF)}
                label = f"{name}, burst {'on' if burst else 'off'}"
                results[label] = _measure(servers, options, seconds, handler_s, scale)
    _plot(results, args.out / "distributors.png")
    baseline = results["exponential, burst on"]
    result = {
        "smoke": args.smoke,
        "seconds_per_configuration": seconds,
        "handler_us_per_record": args.handler_us / scale,
        "offered_records_per_s": {str(level): rate * scale for level, rate in RATES.items()},
        "results": results,
        "level2_p99_ratio_vs_exponential_burst": {
            label: round(r["2"]["p99_ms"] / baseline["2"]["p99_ms"], 3)
            for label, r in results.items()
        },
        "plot": "distributors.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
