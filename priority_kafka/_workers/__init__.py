"""What both executors run records on, behind one interface: the worker pool, a record's
handling (retries, failure policy, dead letters), the counters, the lifecycle (``run()`` with
the stop signals, ``stop()``, drain and release) and the outputs a handler returns.

:class:`~priority_kafka.executor.ShardedExecutor` (``priority_kafka/executor/``) and
:class:`~priority_kafka.confluent.share_executor.ShareExecutor` import these names from here,
never from the modules below, so neither executor reaches into the other's package. What an
executor gives the pool is a :class:`Completion` per batch (the sharded executor's partition
offsets, the share executor's acquisition); the rest of each executor (its ledger and commits,
its acknowledgements and locks) stays in its own package. No client library is imported here.
"""

from priority_kafka._workers._handling import (
    DEAD_LETTER_HEADERS,
    Outcome,
    RecordHandler,
    Result,
    Undeserializable,
    retry_delays,
)
from priority_kafka._workers._lifecycle import Lifecycle, State, check_callables
from priority_kafka._workers._loop_watch import LoopWatch
from priority_kafka._workers._outputs import Output, OutputBuffer, outputs_of
from priority_kafka._workers._pool import Completion, Failure, Item, Running, WorkerPool
from priority_kafka._workers._signals import handle_stop_signals, run_signals
from priority_kafka._workers._stats import Counters, ExecutorStats

__all__ = [
    "DEAD_LETTER_HEADERS", "Completion", "Counters", "ExecutorStats", "Failure", "Item",
    "Lifecycle", "LoopWatch", "Outcome", "Output", "OutputBuffer", "RecordHandler", "Result",
    "Running", "State", "Undeserializable", "WorkerPool", "check_callables",
    "handle_stop_signals", "outputs_of", "retry_delays", "run_signals",
]
