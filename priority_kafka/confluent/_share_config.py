"""The settings of a ShareExecutor, the figures it reports, and reading a share group's own.

:class:`ShareExecutorConfig` holds the options; those it has in common with
:class:`~priority_kafka.config.ExecutorConfig` (workers, retries, timeouts) are checked by it
(:meth:`ShareExecutorConfig.common`), so both executors accept the same values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from priority_kafka._checks import check_int, shown
from priority_kafka.config import ExecutorConfig
from priority_kafka.errors import ConfigError

__all__ = [
    "SHARE_FAILURE_POLICIES",
    "GroupSettings",
    "ShareExecutorConfig",
    "ShareExecutorStats",
    "ShareFailurePolicy",
    "ShareLevelStats",
    "read_group_settings",
]

ShareFailurePolicy: TypeAlias = Literal["stop", "dead_letter", "reject", "release", "callback"]
SHARE_FAILURE_POLICIES: tuple[ShareFailurePolicy, ...] = (
    "stop", "dead_letter", "reject", "release", "callback",
)
# How the share policies run through the executor's RecordHandler: reject, release and
# callback are a callback that sets the record's acknowledgement.
_COMMON_POLICY = {
    "stop": "stop", "dead_letter": "dead_letter", "reject": "callback", "release": "callback",
    "callback": "callback",
}
_MAX_MS = 3_600_000


def _optional_ms(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_int(attribute.name, value, minimum=1, maximum=_MAX_MS)


def _unordered(value: object) -> str:
    if value != "unordered":
        raise ConfigError(
            f"'ordering' must be 'unordered' for a ShareExecutor (got {shown(value)}): a share "
            f"group keeps no order, records of one key or partition go to any member in any "
            f"order. For ordered handling use ShardedExecutor over a PriorityConsumer."
        )
    return "unordered"


def _policy(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or value not in SHARE_FAILURE_POLICIES:
        raise ConfigError(f"'failure_policy' must be one of {', '.join(SHARE_FAILURE_POLICIES)} "
                          f"(got {shown(value)}).")


@attrs.frozen(kw_only=True)
class ShareExecutorConfig:
    """Settings of a :class:`~priority_kafka.confluent.ShareExecutor` (times in ms).

    ``shards``, ``max_attempts``, ``retry_backoff_ms``, ``retry_backoff_max_ms``,
    ``dead_letter_topic``, ``drain_timeout_ms``, ``poll_timeout_ms`` and ``async_concurrency``
    mean what they mean for :class:`~priority_kafka.config.ExecutorConfig`. Besides:

    Attributes:
        ordering: ``"unordered"``, the only mode: share groups keep no order.
        failure_policy: after ``max_attempts`` failed calls: ``"stop"`` (RELEASE the record
            and stop: :meth:`~priority_kafka.confluent.ShareExecutor.run` raises
            HandlerError), ``"dead_letter"`` (send it to ``dead_letter_topic``, then ACCEPT),
            ``"reject"`` (REJECT: the broker archives it, never delivers it again),
            ``"release"`` (RELEASE: any member gets it again, until the group's delivery
            limit archives it) or ``"callback"`` (``on_failure(record, error, attempts)``
            returns the ``AcknowledgeType`` to send; None: ACCEPT).
        commit_interval_ms: acknowledgements of a level that cannot poll yet (explicit mode:
            part of its last poll still runs) are committed at least this often; a level that
            polls sends them with its fetch.
        lock_duration_ms: the levels' record lock (group config
            ``share.record.lock.duration.ms``); None: read from each level's share group
            when :meth:`~priority_kafka.confluent.ShareExecutor.run` starts.
        release_after_ms: records of a poll that no worker started within this are RELEASEd,
            so that another member (or this one later) gets them while a lock can still
            cover them; None: half the lock. Must be below the lock.
        delivery_count_limit: the group's ``share.delivery.count.limit``, to count the
            records this member releases at their last delivery (the broker archives them);
            None: read with the lock.
    """

    shards: int = 16
    ordering: str = attrs.field(default="unordered", converter=_unordered)
    max_attempts: int = 3
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 5000
    failure_policy: ShareFailurePolicy = attrs.field(default="stop", validator=_policy)
    dead_letter_topic: str | None = None
    drain_timeout_ms: int = 30000
    poll_timeout_ms: int = 100
    async_concurrency: int | None = None
    commit_interval_ms: int = attrs.field(default=1000, validator=_optional_ms)
    lock_duration_ms: int | None = attrs.field(default=None, validator=_optional_ms)
    release_after_ms: int | None = attrs.field(default=None, validator=_optional_ms)
    delivery_count_limit: int | None = attrs.field(default=None, validator=_optional_ms)

    def __attrs_post_init__(self) -> None:
        self.common()  # checks the shared options as ExecutorConfig does
        lock, release = self.lock_duration_ms, self.release_after_ms
        if lock is not None and release is not None and release >= lock:
            raise ConfigError(f"'release_after_ms' must be below 'lock_duration_ms' ({lock}) "
                              f"(got {release}).")

    def common(self) -> ExecutorConfig:
        """The options shared with ShardedExecutor, as an ExecutorConfig (validated)."""
        return ExecutorConfig(
            shards=self.shards, ordering="unordered", max_attempts=self.max_attempts,
            retry_backoff_ms=self.retry_backoff_ms,
            retry_backoff_max_ms=self.retry_backoff_max_ms,
            failure_policy=_COMMON_POLICY[self.failure_policy],  # type: ignore[arg-type]
            dead_letter_topic=self.dead_letter_topic, drain_timeout_ms=self.drain_timeout_ms,
            poll_timeout_ms=self.poll_timeout_ms, async_concurrency=self.async_concurrency,
        )


@attrs.frozen
class GroupSettings:
    """What the executor needs of a level's share group."""

    lock_ms: int
    delivery_count_limit: int


def read_group_settings(
    admin: Any, groups: Sequence[str], config: ShareExecutorConfig, timeout_s: float = 30.0
) -> dict[str, GroupSettings]:
    """Each group's lock duration and delivery limit: the config's where given, else the
    group's own (DescribeConfigs on the group; ConfigError if that fails)."""
    lock, limit = config.lock_duration_ms, config.delivery_count_limit
    if lock is not None and limit is not None:
        return {group: GroupSettings(lock, limit) for group in groups}
    from confluent_kafka.admin import ConfigResource

    found: dict[str, GroupSettings] = {}
    try:
        futures = admin.describe_configs(
            [ConfigResource(ConfigResource.Type.GROUP, group) for group in groups],
            request_timeout=timeout_s,
        )
        for resource, future in futures.items():
            entries = future.result(timeout_s)
            found[resource.name] = GroupSettings(
                lock if lock is not None else int(entries["share.record.lock.duration.ms"].value),
                limit if limit is not None else int(entries["share.delivery.count.limit"].value),
            )
    except Exception as exc:
        raise ConfigError(
            f"could not read the share groups' 'share.record.lock.duration.ms' and "
            f"'share.delivery.count.limit' ({exc}); pass 'lock_duration_ms' and "
            f"'delivery_count_limit' to the ShareExecutor."
        ) from exc
    return found


@attrs.frozen
class ShareLevelStats:
    """One level of a :class:`~priority_kafka.confluent.ShareExecutor`, since ``run()``.

    ``acquired``: records this member's polls acquired (every delivery counts);
    ``redelivered``: of those, delivered before (delivery count above 1); ``delivery_counts``:
    how many came with each delivery count. ``accepted`` (handled, or dead-lettered),
    ``rejected``, ``released``: acknowledgements sent. Of the releases, ``released_unstarted``
    could not start within ``release_after_ms`` and ``lock_expired`` ran past the lock (their
    outcome was dropped). ``archived``: records this member released (or whose lock ran out
    on it) at their last delivery, which the broker archives undelivered; records archived
    because another member released them, or REJECTed ones, are not in it (the broker does
    not tell clients its archive count). ``ack_failures``: acknowledgements the broker
    refused (a lock already gone), or the client did (the record no longer in flight for
    it). ``outstanding``: acquired and not acknowledged now.
    """

    acquired: int = 0
    redelivered: int = 0
    accepted: int = 0
    rejected: int = 0
    released: int = 0
    released_unstarted: int = 0
    lock_expired: int = 0
    archived: int = 0
    ack_failures: int = 0
    outstanding: int = 0
    delivery_counts: Mapping[int, int] = attrs.field(factory=dict)


@attrs.frozen
class ShareExecutorStats:
    """A :class:`~priority_kafka.confluent.ShareExecutor`'s figures: per level (highest
    first) a :class:`ShareLevelStats`; over all levels ``dead_lettered``, ``failed``,
    ``abandoned`` (retries cut short by stop) and handler ``retries``; gauges ``queued`` and
    ``running`` records."""

    levels: Mapping[int, ShareLevelStats]
    dead_lettered: int = 0
    failed: int = 0
    abandoned: int = 0
    retries: int = 0
    queued: int = 0
    running: int = 0

    def total(self, name: str) -> int:
        """A :class:`ShareLevelStats` counter summed over the levels."""
        if name == "delivery_counts" or name not in _LEVEL_FIELDS:
            raise KeyError(name)
        return sum(getattr(stats, name) for stats in self.levels.values())


_LEVEL_FIELDS = frozenset(field.name for field in attrs.fields(ShareLevelStats))
