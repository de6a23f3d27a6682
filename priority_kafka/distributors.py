"""Split ``max_poll_records`` over priority levels (pure: no I/O, no Kafka).

A *distributor* is any callable ``(max_priority, max_poll_records) -> Mapping[int, int]``
returning a quota for each level ``0 .. max_priority - 1`` (0 is the lowest priority); the
quotas sum to ``max_poll_records``. :func:`distribute` calls one and validates what it returns,
so a user's own function plugs in exactly like the built-in ones.

The built-ins are proportional: level ``i`` of ``N`` has weight ``w_i``; with ``S = sum(w)``,
every level below the top gets ``floor(M * w_i / S)`` and the top level gets the remainder.
:class:`ExponentialDistributor` (weights ``2**i``, the default) and :class:`LinearDistributor`
(weights ``i + 1``) fix the weights by level; :class:`WeightedDistributor` takes them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from numbers import Integral, Real

import attrs

from priority_kafka._checks import MAX_PRIORITY, MAX_RECORDS, check_int, shown
from priority_kafka.errors import ConfigError

__all__ = [
    "Distributor",
    "ExponentialDistributor",
    "LinearDistributor",
    "WeightedDistributor",
    "distribute",
    "parse_distributor",
]

Distributor = Callable[[int, int], Mapping[int, int]]
"""The distributor protocol: ``(max_priority, max_poll_records) -> {level: quota}``."""

# A weight is any real number; typeshed does not register int and float as numbers.Real.
Weight = float | Real


def _levels(max_priority: object) -> int:
    return check_int("max_priority", max_priority, minimum=1, maximum=MAX_PRIORITY)


def _records(max_poll_records: object) -> int:
    return check_int("max_poll_records", max_poll_records, minimum=1, maximum=MAX_RECORDS)


def _exact(weights: Sequence[Weight]) -> list[Fraction]:
    """Return the weights as exact fractions, floats read as the decimal they print as.

    Exact arithmetic keeps ``floor(M * w_i / S)`` from landing one below an integer: the binary
    float 0.7 is slightly less than 7/10, so ``[0.7, 0.3]`` would split 10 records as 6 + 4.
    """
    return [Fraction(int(w)) if isinstance(w, Integral) else Fraction(str(w)) for w in weights]


class _Proportional:
    """Base of the built-in distributors: quotas proportional to per-level weights."""

    __slots__ = ()

    def weights(self, max_priority: int) -> tuple[Weight, ...]:
        """Return the weight of each level, lowest level first."""
        raise NotImplementedError

    def minimum_records(self, max_priority: int) -> int:
        """Return the smallest ``max_poll_records`` that gives every level a quota of at least 1.

        Every level below the top needs ``M * w_i >= S``; the top level's remainder is then at
        least ``M * w_top / S > 0``, so its own weight does not raise the minimum.
        """
        max_priority = _levels(max_priority)
        weights = _exact(self.weights(max_priority))
        if max_priority == 1:
            return 1
        return math.ceil(sum(weights) / min(weights[:-1]))

    def __call__(self, max_priority: int, max_poll_records: int) -> dict[int, int]:
        """Return ``{level: quota}``, highest level first, summing to ``max_poll_records``.

        Raises ConfigError when ``max_poll_records`` is below :meth:`minimum_records`, because
        some level would then never be polled.
        """
        max_priority = _levels(max_priority)
        max_poll_records = _records(max_poll_records)
        minimum = self.minimum_records(max_priority)
        if max_poll_records < minimum:
            raise ConfigError(
                f"'max_poll_records' must be at least {minimum} for {max_priority} priority "
                f"levels (got {max_poll_records})."
            )
        weights = _exact(self.weights(max_priority))
        total = sum(weights)
        quotas = {
            level: math.floor(max_poll_records * weights[level] / total)
            for level in range(max_priority - 1)
        }
        top = max_priority - 1
        return {top: max_poll_records - sum(quotas.values())} | dict(reversed(quotas.items()))


@attrs.frozen(repr=False)
class ExponentialDistributor(_Proportional):
    """The default: level ``i`` weighs ``2**i``, so each level gets about twice the one below.

    ``N = 3, M = 50`` gives ``{2: 29, 1: 14, 0: 7}``; ``M`` must be at least ``2**N - 1``.
    """

    def weights(self, max_priority: int) -> tuple[Weight, ...]:
        """Return ``(1, 2, 4, ...)``, lowest level first."""
        return tuple(2**level for level in range(max_priority))

    def __repr__(self) -> str:
        return "ExponentialDistributor()"


@attrs.frozen(repr=False)
class LinearDistributor(_Proportional):
    """Level ``i`` weighs ``i + 1``; ``M`` must be at least ``N * (N + 1) / 2``."""

    def weights(self, max_priority: int) -> tuple[Weight, ...]:
        """Return ``(1, 2, 3, ...)``, lowest level first."""
        return tuple(level + 1 for level in range(max_priority))

    def __repr__(self) -> str:
        return "LinearDistributor()"


def _as_float(weight: Real) -> float:
    """``weight`` as a float; an int too large for one is infinite (and so refused)."""
    try:
        return float(weight)
    except OverflowError:
        return math.inf


def _to_weights(weights: object) -> tuple[Weight, ...]:
    """Return ``weights`` as a tuple after checking each is a positive finite number."""
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence) or not weights:
        raise ConfigError(
            f"'weights' must be a non-empty sequence of numbers (got {shown(weights)})."
        )
    if len(weights) > MAX_PRIORITY:
        raise ConfigError(
            f"'weights' must give at most {MAX_PRIORITY} levels (got {len(weights)} weights)."
        )
    for weight in weights:
        if (
            isinstance(weight, bool)
            or not isinstance(weight, Real)
            or not 0 < _as_float(weight) < math.inf  # NaN fails this too
        ):
            raise ConfigError(
                f"'weights' must all be positive finite numbers (got {shown(weight)} in "
                f"{shown(weights)})."
            )
    return tuple(weights)


@attrs.frozen(repr=False)
class WeightedDistributor(_Proportional):
    """Explicit positive weights, lowest level first: ``WeightedDistributor([1, 2, 5])``.

    Calling it with a ``max_priority`` other than ``len(weights)`` raises ConfigError.
    """

    _weights: tuple[Weight, ...] = attrs.field(alias="weights", converter=_to_weights)

    def weights(self, max_priority: int) -> tuple[Weight, ...]:
        """Return the configured weights, which must cover exactly ``max_priority`` levels."""
        if max_priority != len(self._weights):
            raise ConfigError(
                f"{self!r} has {len(self._weights)} weights but was asked for 'max_priority' "
                f"{shown(max_priority)} levels; give one weight per level."
            )
        return self._weights

    def __repr__(self) -> str:
        return f"WeightedDistributor({list(self._weights)!r})"


def check_distributor(name: str, distributor: object) -> Distributor:
    """Return ``distributor`` if it is a callable that takes ``(max_priority,
    max_poll_records)``; else ConfigError naming ``name`` and the value (so a wrong signature
    fails where it is given, not as a TypeError from inside a poll)."""
    if not callable(distributor):
        raise ConfigError(
            f"{name!r} must be a callable (max_priority, max_poll_records) -> {{level: quota}} "
            f"(got {shown(distributor)})."
        )
    try:
        signature = inspect.signature(distributor)
    except (TypeError, ValueError):  # some builtins have none to show: the call decides
        return distributor
    try:
        signature.bind(1, 1)
    except TypeError as exc:
        raise ConfigError(
            f"{name!r} must take two arguments (max_priority, max_poll_records), but "
            f"{shown(distributor)} has the signature {signature}: {exc}."
        ) from None
    return distributor


def distribute(
    distributor: Distributor, max_priority: int, max_poll_records: int
) -> dict[int, int]:
    """Call ``distributor`` and return its validated quotas as a new dict, highest level first.

    The result must be a Mapping whose keys are exactly the levels ``0 .. max_priority - 1``
    and whose values are non-negative ints summing to ``max_poll_records``; anything else
    raises ConfigError naming the distributor and the offending value.
    """
    check_distributor("distributor", distributor)
    max_priority = _levels(max_priority)
    max_poll_records = _records(max_poll_records)
    result = distributor(max_priority, max_poll_records)
    if not isinstance(result, Mapping):
        raise ConfigError(
            f"distributor {distributor!r} must return a Mapping of level to quota "
            f"(got {shown(result)})."
        )
    levels = range(max_priority)
    # bool and float keys compare equal to 0, 1, ..., so range membership alone would pass them.
    bad_keys = [
        k for k in result if isinstance(k, bool) or not isinstance(k, int) or k not in levels
    ]
    missing = [level for level in levels if level not in result]
    if bad_keys or missing:
        raise ConfigError(
            f"distributor {distributor!r} must return a quota for exactly the levels "
            f"0..{max_priority - 1} (got {shown(dict(result))}; unknown {shown(bad_keys)}, "
            f"missing {missing!r})."
        )
    for level, quota in result.items():
        if isinstance(quota, bool) or not isinstance(quota, Integral) or quota < 0:
            raise ConfigError(
                f"distributor {distributor!r} must return non-negative int quotas "
                f"(got {shown(quota)} for level {level!r})."
            )
    total = sum(int(quota) for quota in result.values())
    if total != max_poll_records:
        raise ConfigError(
            f"distributor {distributor!r} must return quotas summing to 'max_poll_records' "
            f"{max_poll_records} (got {shown(dict(result))}, summing to {shown(total)})."
        )
    return {level: int(result[level]) for level in reversed(levels)}


def parse_distributor(
    text: str, name: str = "max_poll_records_distributor"
) -> ExponentialDistributor | LinearDistributor | WeightedDistributor:
    """The distributor a setting given as text names: ``exponential``, ``linear``, or positive
    weights per level, lowest level first (``1,2,5``: a :class:`WeightedDistributor`).
    Anything else is a ConfigError naming the setting ``name``."""
    choice = text.strip().lower()
    if choice == "exponential":
        return ExponentialDistributor()
    if choice == "linear":
        return LinearDistributor()
    try:
        weights = [float(part) for part in choice.split(",")]
    except ValueError:
        weights = []
    if not weights or not all(math.isfinite(w) and w > 0 for w in weights):
        raise ConfigError(
            f"{name!r} must be 'exponential', 'linear' or positive weights per level, lowest "
            f"level first, like '1,2,5' (got {shown(text)})."
        )
    return WeightedDistributor([int(w) if w.is_integer() else w for w in weights])
