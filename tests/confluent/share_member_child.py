"""A share-group member to be SIGKILLed mid-acquisition (test_confluent_share_kill.py).

``python share_member_child.py consumer|executor SERVERS TOPIC GROUP ACCEPT``: handles (ACCEPTs)
the first ACCEPT records it gets, then keeps polling without handling any more for
``--quiet-s`` seconds, prints the handled offsets as one JSON line and waits to be killed."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from priority_kafka.confluent import PriorityShareConsumer, ShareExecutor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("front", choices=["consumer", "executor"])
    parser.add_argument("servers")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("accept", type=int)
    parser.add_argument("--quiet-s", type=float, default=1.5)
    args = parser.parse_args()
    consumer = PriorityShareConsumer({"bootstrap.servers": args.servers, "group.id": args.group,
                                      "max.priority": 3, "max.poll.records": 20})
    consumer.subscribe([args.topic])
    handled: list[int] = []
    if args.front == "consumer":
        polls_after = 0
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                if len(handled) < args.accept:
                    consumer.acknowledge(message)
                    handled.append(message.offset())
            if len(handled) >= args.accept:
                polls_after += 1
                if quiet_until is None:
                    quiet_until = time.monotonic() + args.quiet_s
            time.sleep(0.02)
        report(handled, polls_after=polls_after,
               buffered=sum(m["buffered"] for m in consumer.metrics().values()))
    else:
        enough = threading.Event()
        lock = threading.Lock()
        hold = threading.Event()  # never set: records after the first ACCEPT ones stay running

        def handle(record: Any) -> None:
            with lock:
                if len(handled) >= args.accept:
                    take = False
                else:
                    handled.append(record.offset)
                    take = True
                    if len(handled) == args.accept:
                        enough.set()
            if not take:
                hold.wait()

        executor = ShareExecutor(consumer, handle, shards=4, commit_interval_ms=200,
                                 drain_timeout_ms=1000)
        thread = threading.Thread(target=executor.run, daemon=True)
        thread.start()
        enough.wait(120)
        time.sleep(args.quiet_s)  # longer than commit_interval_ms: the ACCEPTs are sent
        with lock:
            report(list(handled))
    time.sleep(600)


def report(handled: list[int], **figures: Any) -> None:
    print(json.dumps({"handled": handled, **figures}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
