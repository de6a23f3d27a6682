"""Argument checks shared by the pure modules; each failure is a ConfigError naming the value."""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import attrs

from priority_kafka.errors import ConfigError

#: Most priority levels anywhere: each level is a Kafka topic and a consumer (a group member
#: with its own connections), so real deployments use a handful; the bound keeps everything
#: computed per level (exponential weights 2**i, topic names, one history row each) instant.
MAX_PRIORITY = 1000
#: Most records any count, quota or limit may be: far beyond a poll or a trigger, and small
#: enough that sums over every level and window stay exact in a 64-bit integer.
MAX_RECORDS = 10**12
#: Most polls a capacity-burst history window remembers: it holds one count per level and
#: poll, so 8 bytes (a list slot) * levels * window (the default window is 6).
MAX_WINDOW = 100_000

# Long enough for any Kafka topic name (249 characters) to show whole.
_SHOWN_CHARS = 300


def shown(value: object) -> str:
    """``repr(value)`` for an error message: at most about 300 characters, and never failing.

    Python refuses to print an int of more than 4300 digits, and a message quoting a
    megabyte-long string helps nobody.
    """
    try:
        text = repr(value)
    except ValueError:  # int too long to convert to a string
        bits = value.bit_length() if isinstance(value, int) else "?"
        return f"<{type(value).__name__} of {bits} bits>"
    if len(text) > _SHOWN_CHARS:
        return f"{text[:_SHOWN_CHARS]}... ({len(text)} characters)"
    return text


def check_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as an int if it is an integer (never a bool) within the given bounds."""
    # bool is an int subclass; True as a level or a count is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"{name!r} must be an int (got {shown(value)}).")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name!r} must be at least {minimum} (got {shown(value)}).")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{name!r} must be at most {maximum} (got {shown(value)}).")
    return number


def check_number(
    name: str,
    value: object,
    *,
    minimum: float,
    maximum: float | None = None,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float if it is a real number (never a bool) within the bounds.

    NaN is always rejected (it compares false with every bound, so it would slip through and
    break the arithmetic later); infinity only unless ``allow_inf`` (for "wait for ever").
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigError(f"{name!r} must be a number >= {minimum:g} (got {shown(value)}).")
    if maximum is not None and isinstance(value, Integral) and int(value) > maximum:
        # Compared as an int: float() of a huge int overflows.
        raise ConfigError(f"{name!r} must be at most {maximum:g} (got {shown(value)}).")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if math.isnan(number) or (math.isinf(number) and not (allow_inf and number > 0)):
        allowed = " or inf" if allow_inf else ""
        raise ConfigError(f"{name!r} must be a finite number{allowed} (got {shown(value)}).")
    if number < minimum:
        raise ConfigError(f"{name!r} must be a number >= {minimum:g} (got {shown(value)}).")
    if maximum is not None and number > maximum and not math.isinf(number):
        raise ConfigError(f"{name!r} must be at most {maximum:g} (got {shown(value)}).")
    return number


def int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute[Any], object], None]:
    """Return an attrs validator: the field is an int (not a bool) of at least ``minimum``.

    The error names the ``__init__`` argument (the attribute's alias, without a leading ``_``).
    """

    def validate(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        check_int(attribute.alias or attribute.name, value, minimum=minimum)

    return validate
