"""What one level of a ShareExecutor acquired in one poll, until every record is acknowledged.

A share consumer in explicit acknowledgement mode polls again only once every record of its
previous poll is acknowledged, so a level holds at most one :class:`Acquisition` at a time.
Each of its records is

- *pending*: acquired, not started by a worker; then *started* (:meth:`Acquisition.claim`, by
  the worker about to run it) or *released* (:meth:`Acquisition.release_unstarted`, once the
  acquisition is ``release_after`` old: it could not start in time, so another member, or this
  one later, takes it while a lock can still cover it);
- *started*: a worker runs it; then *settled* (:meth:`Acquisition.settle`, its outcome is
  acknowledged) or *expired* (:meth:`Acquisition.expire`, at the lock's end: the consumer must
  acknowledge it to poll again, so it is released and the handler's outcome is ignored).

The deadlines count from before the poll that acquired the records, so they never fall later
than the broker's own.

Pure: no Kafka, clocks (times are passed in) or threads. :meth:`Acquisition.claim` runs on
worker threads; it and the owner's calls take records out of the pending set with one atomic
``dict.pop`` each, so every record is either started or released, never both.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["Acquisition"]

R = TypeVar("R", bound=Hashable)

_MISSING = object()


class Acquisition(Generic[R]):
    """The records of one poll of one level, and the two deadlines that apply to them."""

    __slots__ = ("_pending", "_unsettled", "expire_at", "level", "release_at")

    def __init__(
        self, level: int, records: Iterable[R], polled_at: float, release_after_s: float,
        lock_s: float,
    ) -> None:
        self.level = level
        self._pending: dict[R, None] = dict.fromkeys(records)
        self._unsettled: dict[R, None] = dict(self._pending)
        #: From then on, records not started are released.
        self.release_at = polled_at + release_after_s
        #: From then on, the records' locks may be gone.
        self.expire_at = polled_at + lock_s

    def __repr__(self) -> str:
        return (f"Acquisition(level={self.level}, pending={len(self._pending)}, "
                f"unsettled={len(self._unsettled)})")

    def __len__(self) -> int:
        """Records not acknowledged yet."""
        return len(self._unsettled)

    @property
    def done(self) -> bool:
        """Whether every record is acknowledged (the level may poll again)."""
        return not self._unsettled

    def claim(self, record: R) -> bool:
        """A worker is about to start ``record``: True, unless it was released (or expired)
        first, and the worker must skip it. Any thread."""
        return self._pending.pop(record, _MISSING) is not _MISSING

    def settle(self, record: R) -> bool:
        """``record``'s outcome is known: True if it is to be acknowledged now, False if it
        was released or expired meanwhile (its outcome no longer counts)."""
        self._pending.pop(record, None)
        return self._unsettled.pop(record, _MISSING) is not _MISSING

    def release_unstarted(self, now: float) -> list[R]:
        """From ``release_at`` on: the records no worker started, taken out (to RELEASE)."""
        if now < self.release_at or not self._pending:
            return []
        return self._take(self._pending)

    def expire(self, now: float) -> list[R]:
        """From ``expire_at`` on: every record not settled yet, taken out (to RELEASE)."""
        if now < self.expire_at:
            return []
        return self.release_all()

    def release_all(self) -> list[R]:
        """Every record not settled yet, taken out (to RELEASE on shutdown)."""
        unstarted = self._take(self._pending)  # first, so none of them starts from now on
        return unstarted + self._take(self._unsettled)

    def _take(self, records: dict[R, None]) -> list[R]:
        taken = []
        for record in list(records):
            # A worker's claim() pops pending records concurrently: whoever pops one owns it.
            if records.pop(record, _MISSING) is not _MISSING:
                self._unsettled.pop(record, None)
                taken.append(record)
        return taken
