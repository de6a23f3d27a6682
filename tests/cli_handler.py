"""Handlers for the CLI tests: `handle` appends each record's topic and offset to
$CLI_HANDLER_OUT; `slow` takes 2 ms; `gated` waits for the metrics test."""

import itertools
import os
import threading


def handle(record):
    with open(os.environ["CLI_HANDLER_OUT"], "a") as out:
        out.write(f"{record.topic} {record.offset}\n")


def slow(record):
    """A handler taking 2 ms, so a consume run lasts long enough to be scraped."""
    import time

    time.sleep(0.002)


#: Set by the metrics test once it has scraped what it needs: `gated` holds every record after
#: the first 100 until then, so the run cannot end before the endpoint was observed.
SCRAPED = threading.Event()
_seen = itertools.count()


def arm_gate():
    global _seen
    SCRAPED.clear()
    _seen = itertools.count()


def gated(record):
    if next(_seen) >= 100:
        SCRAPED.wait(60)
