"""Pausing Python's cyclic garbage collector around allocation-heavy work that does not wait.

Reading records allocates objects the collector tracks (kafka-python's ``ConsumerRecord`` with
its headers list, confluent's ``Message``, timestamp tuples), none of them in reference cycles.
Each 700 allocations start a collection, and records held for a while (a consumer's prefetch
buffer, a Spark batch being built) survive into the older generations, whose collections scan
them again and again, the oldest the whole heap. Pausing the collector for such a stretch
costs nothing else: reference counting still frees everything as usual, and the collection
owed runs at the first allocation after the pause.

In a process shared with the application (``PriorityConsumer.poll()``), a pause is never held
across a blocking wait (:func:`gc_running`) or a hand-over to the caller, so other
threads' garbage cycles wait at most as long as the paused work itself. A Spark range reader,
alone in its Python worker, pauses for each batch's fetching and building, never across the
hand-over to Spark. A collector the application disabled stays disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "gc_running"]

_paused_here = threading.local()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, if it is enabled."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _paused_here.active = True
    try:
        yield
    finally:
        _paused_here.active = False
        gc.enable()


@contextmanager
def gc_running() -> Iterator[None]:
    """Inside :func:`gc_paused` on this thread, let the collector run for the block
    (a wait that may block); elsewhere, do nothing."""
    if not getattr(_paused_here, "active", False):
        yield
        return
    gc.enable()
    try:
        yield
    finally:
        gc.disable()
