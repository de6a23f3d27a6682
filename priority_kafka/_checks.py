"""Argument checks shared by the pure modules; each failure is a ConfigError naming the value."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import attrs

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


def check_number(name: str, value: object, *, minimum: float) -> float:
    """Return ``value`` if it is a real number (never a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Real) or value < minimum:
        raise ConfigError(f"{name!r} must be a number >= {minimum:g} (got {value!r}).")
    return float(value)


def int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute[Any], object], None]:
    """Return an attrs validator: the field is an int (not a bool) of at least ``minimum``.

    The error names the ``__init__`` argument (the attribute's alias, without a leading ``_``).
    """

    def validate(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        check_int(attribute.alias or attribute.name, value, minimum=minimum)

    return validate
