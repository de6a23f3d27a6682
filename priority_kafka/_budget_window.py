"""The tokens of the last ``window_s`` seconds of a budget (pure: no I/O, threads or clock).

Each token counts from its call's start (:meth:`SpendWindow.started`), and until then from its
grant, so a bound on the window bounds when calls start however long granted records waited
for a worker (see :mod:`priority_kafka.budgets`).
"""

from __future__ import annotations

from collections import deque

__all__ = ["SpendWindow"]

# A float time compared with one computed from it may be off by rounding.
_EPSILON = 1e-9


class SpendWindow:
    """Tokens spent per time within the last ``window_s`` seconds, and their sum."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        # [time, tokens] per time, oldest first (a caller's clock read before a later one's
        # may come after it: kept a little longer by forget(), never shorter), each also by
        # its time.
        self._entries: deque[list[float]] = deque()
        self._at: dict[float, list[float]] = {}
        #: The tokens the window holds.
        self.total = 0.0

    def __repr__(self) -> str:
        return f"SpendWindow(window_s={self.window_s}, total={self.total:g})"

    def spend(self, now: float, tokens: float) -> None:
        """``tokens`` spent at ``now``."""
        entry = self._at.get(now)
        if entry is None:
            entry = self._at[now] = [now, 0.0]
            self._entries.append(entry)
        entry[1] += tokens
        self.total += tokens

    def started(self, now: float, granted_at: float, tokens: float) -> None:
        """Tokens spent at ``granted_at`` count from ``now`` instead (their call starts)."""
        self.unspend(granted_at, tokens)
        self.spend(now, tokens)

    def unspend(self, granted_at: float, tokens: float) -> None:
        """Tokens spent at ``granted_at`` no longer count (if still in the window)."""
        entry = self._at.get(granted_at)
        if entry is not None:
            taken = min(entry[1], tokens)
            entry[1] -= taken
            self.total -= taken

    def forget(self, now: float) -> None:
        """Drop what left the window ending at ``now``."""
        horizon = now - self.window_s + _EPSILON
        while self._entries and self._entries[0][0] <= horizon:
            entry = self._entries.popleft()
            self.total -= entry[1]
            if self._at.get(entry[0]) is entry:
                del self._at[entry[0]]

    def opens(self, now: float, cap: float) -> float:
        """When the window holds at most ``cap - 1`` again, room for a grant (``now`` if it
        does)."""
        excess = self.total - (cap - 1)
        for at, tokens in self._entries:
            if excess <= _EPSILON:
                break
            excess -= tokens
            now = max(now, at + self.window_s)
        return now
