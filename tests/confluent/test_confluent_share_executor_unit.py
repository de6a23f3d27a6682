"""ShareExecutor without a broker: the acquisition states and deadlines, and bad settings."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from priority_kafka.confluent import PriorityShareConsumer, ShareExecutor, ShareExecutorConfig
from priority_kafka.confluent._acquisition import Acquisition
from priority_kafka.errors import ConfigError


def test_a_record_is_either_started_or_released_never_both() -> None:
    """Before release_at nothing is released; from then on the records no worker claimed are
    released (once), a claimed one is not, and a released one can no longer be claimed; a
    settled record is out, a released one settles as False."""
    acquisition = Acquisition(0, ["a", "b", "c"], polled_at=10.0, release_after_s=5.0,
                              lock_s=30.0)
    assert acquisition.claim("a")
    assert acquisition.release_unstarted(14.9) == []
    assert sorted(acquisition.release_unstarted(15.0)) == ["b", "c"]
    assert acquisition.release_unstarted(16.0) == []
    assert not acquisition.claim("b")
    assert not acquisition.settle("b") and len(acquisition) == 1 and not acquisition.done
    assert acquisition.settle("a") and acquisition.done


def test_at_the_lock_end_every_unsettled_record_expires() -> None:
    """expire() takes nothing before expire_at, then every record not settled (running or not
    started), and a later settle of them is False; release_all() takes what is left."""
    acquisition = Acquisition(2, ["a", "b", "c", "d"], polled_at=0.0, release_after_s=15.0,
                              lock_s=30.0)
    assert acquisition.claim("a") and acquisition.claim("b")
    assert acquisition.settle("a")
    assert acquisition.expire(29.99) == []
    assert sorted(acquisition.expire(30.0)) == ["b", "c", "d"]
    assert not acquisition.settle("b") and acquisition.done
    other = Acquisition(1, ["x", "y"], polled_at=0.0, release_after_s=1.0, lock_s=2.0)
    assert other.claim("x")
    assert sorted(other.release_all()) == ["x", "y"] and other.done and not other.claim("y")


def test_claims_racing_a_release_split_the_records_exactly() -> None:
    """Workers claiming while the owner releases: every record is claimed or released, by
    exactly one side."""
    records = list(range(20_000))
    acquisition = Acquisition(0, records, polled_at=0.0, release_after_s=0.0, lock_s=1.0)
    claimed: list[list[int]] = [[], []]
    start = threading.Barrier(3)

    def worker(mine: list[int], part: list[int]) -> None:
        start.wait()
        mine.extend(record for record in part if acquisition.claim(record))

    threads = [threading.Thread(target=worker, args=(claimed[i], records[i::2]))
               for i in range(2)]
    for thread in threads:
        thread.start()
    start.wait()
    released = acquisition.release_unstarted(0.0)
    for thread in threads:
        thread.join()
    assert sorted(released + claimed[0] + claimed[1]) == records


def consumer() -> PriorityShareConsumer:
    return PriorityShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                  "max.priority": 3})


@pytest.mark.parametrize(("options", "message"), [
    ({"ordering": "key"}, r"'ordering' must be 'unordered' for a ShareExecutor \(got 'key'\)"),
    ({"ordering": "partition"}, r"must be 'unordered'.*got 'partition'"),
    ({"failure_policy": "skip"}, r"'failure_policy' must be one of stop, dead_letter, reject, "
                                 r"release, callback \(got 'skip'\)"),
    ({"failure_policy": "callback"}, r"'on_failure' must be callable"),
    ({"failure_policy": "dead_letter"}, r"'dead_letter_topic' must be a topic name"),
    ({"shards": 0}, r"'shards' must be at least 1"),
    ({"lock_duration_ms": 4000, "release_after_ms": 4000},
     r"'release_after_ms' must be below 'lock_duration_ms' \(4000\)"),
    ({"release_after_ms": 0}, r"'release_after_ms' must be at least 1"),
    ({"max_in_flight_per_partition": 10}, r"unknown ShareExecutor option.*max_in_flight"),
])
def test_bad_settings_are_refused_naming_them(options: dict[str, Any], message: str) -> None:
    with consumer() as c, pytest.raises(ConfigError, match=message):
        ShareExecutor(c, print, **options)


def test_the_consumer_and_handler_are_checked() -> None:
    """Only a PriorityShareConsumer that has not polled, and a callable handler."""
    with pytest.raises(ConfigError, match="'consumer' must be a PriorityShareConsumer"):
        ShareExecutor(object(), print)  # type: ignore[arg-type]
    with consumer() as c:
        with pytest.raises(ConfigError, match="'handler' must be callable"):
            ShareExecutor(c, "print")  # type: ignore[arg-type]
        executor = ShareExecutor(c, print, shards=2)
        assert repr(executor) == ("ShareExecutor(shards=2, failure_policy='stop', "
                                  "state='new')")
    assert ShareExecutorConfig().ordering == "unordered"


def test_the_groups_lock_and_limit_are_read_or_taken_from_the_options() -> None:
    """Given both options, no request is made; otherwise each group's own settings are read,
    and a failure to read them names the options that replace them."""
    from concurrent.futures import Future

    from priority_kafka.confluent._share_config import GroupSettings, read_group_settings

    class Entry:
        def __init__(self, value: str) -> None:
            self.value = value

    class Admin:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
            if self.fail:
                raise RuntimeError("not authorized")
            futures = {}
            for resource in resources:
                future: Future[Any] = Future()
                future.set_result({"share.record.lock.duration.ms": Entry("20000"),
                                   "share.delivery.count.limit": Entry("3")})
                futures[resource] = future
            return futures

    given = ShareExecutorConfig(lock_duration_ms=4000, delivery_count_limit=2)
    assert read_group_settings(None, ["g-0"], given) == {"g-0": GroupSettings(4000, 2)}
    read = read_group_settings(Admin(False), ["g-0", "g-1"], ShareExecutorConfig())
    assert read == {"g-0": GroupSettings(20000, 3), "g-1": GroupSettings(20000, 3)}
    half = read_group_settings(Admin(False), ["g-0"], ShareExecutorConfig(lock_duration_ms=9000))
    assert half == {"g-0": GroupSettings(9000, 3)}
    with pytest.raises(ConfigError, match=r"not authorized.*pass 'lock_duration_ms' and "
                                          r"'delivery_count_limit'"):
        read_group_settings(Admin(True), ["g-0"], ShareExecutorConfig())
