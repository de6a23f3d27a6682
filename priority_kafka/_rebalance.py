"""One rebalance-listener chain: our hooks first, then the user's listener (sync or async).

kafka-python 3 calls a consumer's listener on its IO thread while the polling thread waits
inside ``poll()``, and awaits an ``AsyncConsumerRebalanceListener``'s coroutines there. Both
PriorityConsumer (per level) and ShardedExecutor install a :class:`ChainedListener`; they nest
naturally: the executor's chain is the user listener of each level's chain, so a revoke runs
the level's bookkeeping, then the executor's, then the user's.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from priority_kafka._structs import TopicPartition
from priority_kafka.errors import ConfigError

__all__ = ["ChainedListener", "RebalanceHooks", "check_listener"]

_METHODS = ("on_partitions_revoked", "on_partitions_assigned", "on_partitions_lost")


class RebalanceHooks(Protocol):
    """What a component does when its consumer's group moves partitions."""

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        """Partitions are about to move; they are still ours (commits are allowed)."""

    async def lost(self, partitions: set[TopicPartition]) -> None:
        """Partitions were already given away (session expired): commit nothing for them."""

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        """The group settled; these partitions are ours now (possibly none)."""


def check_listener(listener: object) -> None:
    """Raise ConfigError unless ``listener`` is None or has a rebalance listener's methods.

    kafka-python's two listener classes have them, and so does any object that defines
    ``on_partitions_revoked`` and ``on_partitions_assigned`` (duck typing, checked without
    importing kafka-python; a missing ``on_partitions_lost`` falls back to
    ``on_partitions_revoked``, kafka-python's default).
    """
    if listener is None:
        return
    if not all(callable(getattr(listener, name, None)) for name in _METHODS[:2]):
        raise ConfigError(
            "'listener' must be a kafka ConsumerRebalanceListener or "
            f"AsyncConsumerRebalanceListener (got {listener!r})."
        )


class ChainedListener:
    """Runs ``ours`` (a :class:`RebalanceHooks`), then ``user``'s listener, for each event.

    kafka-python takes it as an ``AsyncConsumerRebalanceListener``
    (``priority_kafka.kafka_python._kafka`` registers it as one, so this module needs no
    kafka-python).

    The user's listener gets the same event it would get from kafka-python: lost partitions
    arrive as ``on_partitions_lost`` (whose kafka-python default calls
    ``on_partitions_revoked``).
    """

    def __init__(self, ours: RebalanceHooks, user: Any = None) -> None:
        check_listener(user)
        self.ours = ours
        self.user = user

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.ours.revoked(set(revoked))
        await self._call_user("on_partitions_revoked", revoked)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.ours.lost(set(lost))
        await self._call_user("on_partitions_lost", lost)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.ours.assigned(set(assigned))
        await self._call_user("on_partitions_assigned", assigned)

    async def _call_user(self, method: str, partitions: set[TopicPartition]) -> None:
        if self.user is not None:
            call = getattr(self.user, method, None) or self.user.on_partitions_revoked
            result = call(partitions)
            if inspect.isawaitable(result):
                await result

    def __repr__(self) -> str:
        return f"ChainedListener(ours={self.ours!r}, user={self.user!r})"
