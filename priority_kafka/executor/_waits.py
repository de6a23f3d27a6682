"""How long the executor's loops wait while partitions are paused, one value for both loops:
:meth:`ShardedExecutor.run`'s thread and ``run_async()`` (``_async.py``) import it from here
(``_async`` importing the executor package at every poll was a circular import's way round)."""

__all__ = ["PAUSED_WAIT_S"]

#: Longest wait while a partition is paused: in the poll, where a record of another partition
#: wakes the thread at once, but never longer than the workers need for what is queued (a
#: paused partition resumes as soon as its records are done); then, if the poll found nothing
#: and no batch came back meanwhile, for the next batch handed back (a slow or stuck handler).
PAUSED_WAIT_S = 0.01
