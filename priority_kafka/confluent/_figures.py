"""RoundFigures: the levels' figures a confluent PriorityConsumer publishes once per round.

The consuming thread only copies here (a round of ``poll()`` calls is the hot path): what each
level returned in the ended rounds, the round's quotas and the partitions paused through
``pause()``, counted by level. The :class:`~priority_kafka._levels.LevelFigures` are built by
whoever reads them, from one immutable publication (no lock, no retry).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from priority_kafka._levels import LevelFigures, LevelRouter, figures_of, publish
from priority_kafka.burst import CapacityBurst

__all__ = ["RoundFigures"]


class RoundFigures:
    """Publishes ``burst``'s levels' figures at the end of each round (:meth:`ended`);
    ``quotas`` reads the round's quotas, ``paused`` is the front-end's set of paused
    ``(topic, partition)``, whose levels ``router`` tells."""

    __slots__ = ("_burst", "_paused", "_published", "_quotas", "_returned", "_router")

    def __init__(
        self,
        burst: CapacityBurst,
        router: LevelRouter,
        quotas: Callable[[], Mapping[int, int]],
        paused: set[tuple[str, int]],
    ) -> None:
        self._burst = burst
        self._router = router
        self._quotas = quotas
        self._paused = paused
        self._returned = dict.fromkeys(burst.reserved, 0)
        self._published = publish(burst, {}, {}, {}, {}, {})

    def ended(self, counts: dict[int, int]) -> None:
        """A round ended having returned ``counts`` records per level (burst.Round's
        ``ended``)."""
        returned = self._returned
        for level, count in counts.items():
            returned[level] += count
        paused: dict[int, int] = {}
        for topic, _ in self._paused:
            level = self._router.level_of(topic)
            paused[level] = paused.get(level, 0) + 1
        # The round's quotas dict is replaced, never changed, when the next round starts.
        self._published = publish(self._burst, self._quotas(), dict(returned), {}, {}, paused)

    def current(self) -> Mapping[int, LevelFigures]:
        """The levels' figures as of the last ended round, highest level first, read-only."""
        return figures_of(self._published)
