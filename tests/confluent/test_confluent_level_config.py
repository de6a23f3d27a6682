"""Each level's librdkafka config: its own group and ids, and a share of one Consumer's prefetch."""

from __future__ import annotations

from priority_kafka._levels import LevelRouter
from priority_kafka.confluent._config import level_prefetch


def test_levels_together_prefetch_the_fetch_buffer_unless_configured():
    router = LevelRouter(3)
    prefetch = level_prefetch(3, 16 << 20)
    level = router.level_config({"group.id": "billing"}, 0, "librdkafka", prefetch)
    assert level["queued.min.messages"] == 50_000  # half librdkafka's 100,000 per partition
    assert level["queued.max.messages.kbytes"] == (16 << 10) // 3  # fetch.buffer.bytes, shared
    assert level_prefetch(3, 96 << 20)["queued.max.messages.kbytes"] == 32 << 10
    assert level["fetch.max.bytes"] == (16 << 20) // 3  # one response: at most the share
    assert level_prefetch(64, 1 << 20)["queued.max.messages.kbytes"] == 1024  # at least 1 MiB
    assert level_prefetch(64, 1 << 20)["fetch.max.bytes"] == 1_000_000  # message.max.bytes
    assert level_prefetch(3, 1 << 20, 5_000_000)["fetch.max.bytes"] == 5_000_000
    huge = level_prefetch(1, 1 << 40)  # librdkafka's largest values
    assert (huge["queued.max.messages.kbytes"], huge["fetch.max.bytes"]) == (
        2_097_151, 2_147_483_135
    )
    assert level["fetch.queue.backoff.ms"] == 2  # librdkafka's 1 s idled a drained level
    given = {"group.id": "billing", "queued.min.messages": 7, "fetch.queue.backoff.ms": 1000}
    level = router.level_config(given, 0, "librdkafka", prefetch)
    assert (level["queued.min.messages"], level["fetch.queue.backoff.ms"]) == (7, 1000)
