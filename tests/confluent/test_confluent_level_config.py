"""Each level's librdkafka config: its own group and ids, and a share of one Consumer's prefetch."""

from __future__ import annotations

from priority_kafka._levels import LevelRouter
from priority_kafka.confluent._config import level_prefetch


def test_levels_together_prefetch_what_one_consumer_does_unless_configured():
    router = LevelRouter(3)
    level = router.level_config({"group.id": "billing"}, 0, "librdkafka", level_prefetch(3))
    assert level["queued.min.messages"] == 50_000  # half librdkafka's 100,000 per partition
    assert level["queued.max.messages.kbytes"] * 3 <= 65_536  # librdkafka's 64 MiB, shared
    assert level["fetch.queue.backoff.ms"] == 10  # librdkafka's 1 s idled a drained level
    given = {"group.id": "billing", "queued.min.messages": 7, "fetch.queue.backoff.ms": 1000}
    level = router.level_config(given, 0, "librdkafka", level_prefetch(3))
    assert (level["queued.min.messages"], level["fetch.queue.backoff.ms"]) == (7, 1000)
