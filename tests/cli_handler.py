"""A handler for the CLI test: appends each record's topic and offset to $CLI_HANDLER_OUT."""

import os


def handle(record):
    with open(os.environ["CLI_HANDLER_OUT"], "a") as out:
        out.write(f"{record.topic} {record.offset}\n")


def slow(record):
    """A handler taking 2 ms, so a consume run lasts long enough to be scraped."""
    import time

    time.sleep(0.002)


def fail_odd(record):
    """A handler failing on every record at an odd offset (they go to the dead-letter topic)."""
    if record.offset % 2:
        raise ValueError(f"odd offset {record.offset}")
