"""Argument checks shared by the pure modules; each failure is a ConfigError naming the value."""

from __future__ import annotations

from numbers import Integral

from priority_kafka.errors import ConfigError


def check_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as an int if it is an integer (never a bool) within the given bounds."""
    # bool is an int subclass; True as a level or a count is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"{name!r} must be an int (got {value!r}).")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name!r} must be at least {minimum} (got {value!r}).")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{name!r} must be at most {maximum} (got {value!r}).")
    return number
