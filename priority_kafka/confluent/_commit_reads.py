"""A read of the assigned partitions' commits that librdkafka never retries (librdkafka issue
#5586, open in 2.16), and what the executor does about it.

After an assignment, librdkafka reads the committed offsets (OffsetFetch) before it starts
fetching. When the coordinator it asks has just moved, the broker answers the whole request
with NOT_COORDINATOR and no partitions: librdkafka emits the error event "Failed to fetch
committed offsets for 0 partition(s) in group ...", refreshes the coordinator, and never asks
again, so those partitions are never fetched (their lag grows for ever; a new assignment
recovers). The chaos soak hit it after a leader kill: one level of a member handled nothing
for the last three minutes of the run while its records waited.

The executor renews the level's consumer (``PriorityConsumer.renew_level``: a new member
whose assignment reads the commits again) and says why; a plain ``Consumer`` cannot be
renewed from here, so the executor stops with the error instead of stalling in silence.
"""

from __future__ import annotations

import re
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from priority_kafka.confluent._config import InvalidArgError

__all__ = ["unretried_commit_read"]

# The request failed as a whole: a per-partition failure names its partitions' count.
_WHOLE_REQUEST = re.compile(r'Failed to fetch committed offsets for 0 partition\(s\) in group '
                            r'"(?P<group>[^"]+)"')


def unretried_commit_read(consumer: Any, error: KafkaError) -> KafkaException | None:
    """Act on ``error`` if it is such a failed read: renew the level of ``consumer`` (a
    PriorityConsumer) whose group it names and return None; for a consumer that cannot be
    renewed, the KafkaException to stop with. None for any other error."""
    match = _WHOLE_REQUEST.search(error.str())
    if match is None:
        return None
    group = match["group"]
    reason = (f"its read of the assigned partitions' commits in group {group!r} failed "
              f"({error.str()}) and librdkafka does not retry it (issue #5586): they would "
              f"never be fetched")
    renew = getattr(consumer, "renew_level", None)
    level = group.rpartition("-")[2]  # a PriorityConsumer's level groups are <group.id>-<level>
    if renew is not None and level.isdigit():
        try:
            renew(int(level), reason)
            return None
        except InvalidArgError:  # not one of its levels
            pass
    return KafkaException(KafkaError(error.code(), f"the consumer stops: {reason}; recreate "
                                                   f"the consumer to read them"))
