"""Tests for priority_kafka._checks: the shared integer and number argument checks."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from priority_kafka._checks import check_int, check_number, int_at_least, shown
from priority_kafka.errors import ConfigError


def test_integers_within_bounds_come_back_as_int():
    """Any integer type inside the bounds is returned as a plain int."""
    value = check_int("n", np.int64(3), minimum=0, maximum=3)
    assert value == 3
    assert type(value) is int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "'n' must be an int (got True)."),
        (2.0, "'n' must be an int (got 2.0)."),
        ("2", "'n' must be an int (got '2')."),
        (-1, "'n' must be at least 0 (got -1)."),
        (4, "'n' must be at most 3 (got 4)."),
    ],
)
def test_bad_values_are_named_in_the_message(value, expected):
    """A bool, a non-integer or an out-of-range value is a ConfigError naming it."""
    with pytest.raises(ConfigError) as info:
        check_int("n", value, minimum=0, maximum=3)
    assert str(info.value) == expected


@attrs.define
class Sized:
    """An attrs class whose private field is validated by int_at_least."""

    _size: int = attrs.field(validator=int_at_least(1))


def test_int_at_least_validates_attrs_fields_by_argument_name():
    """The attrs validator accepts ints >= minimum and names the __init__ argument otherwise."""
    assert Sized(1)._size == 1
    with pytest.raises(ConfigError, match=r"^'size' must be at least 1 \(got 0\)\.$"):
        Sized(0)


def test_numbers_at_least_the_minimum_come_back_as_float():
    """Ints and floats (numpy's too) at or above the minimum are returned as float."""
    assert check_number("t", 0, minimum=0) == 0.0
    assert check_number("t", np.float64(2.5), minimum=0) == 2.5


@pytest.mark.parametrize("value", [-1, -0.5, True, "5", None])
def test_bad_numbers_are_named_in_the_message(value):
    """A bool, a non-number or a number below the minimum fails naming the value."""
    with pytest.raises(ConfigError, match=f"'t' must be a number >= 0 \\(got {value!r}\\)"):
        check_number("t", value, minimum=0)


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        (float("nan"), {}, "'t' must be a finite number (got nan)."),
        (float("nan"), {"allow_inf": True}, "'t' must be a finite number or inf (got nan)."),
        (float("inf"), {}, "'t' must be a finite number (got inf)."),
        (float("-inf"), {"allow_inf": True}, "'t' must be a finite number or inf (got -inf)."),
        (10**400, {}, f"'t' must be a finite number (got {shown(10**400)})."),
        (2**63, {"maximum": 10}, "'t' must be at most 10 (got 9223372036854775808)."),
        (10.5, {"maximum": 10}, "'t' must be at most 10 (got 10.5)."),
    ],
)
def test_nan_infinity_and_too_large_numbers_are_refused(value, kwargs, expected):
    """NaN always, infinity unless allowed and numbers over the maximum fail naming the value."""
    with pytest.raises(ConfigError) as info:
        check_number("t", value, minimum=0, **kwargs)
    assert str(info.value) == expected


def test_infinity_is_accepted_where_allowed():
    """allow_inf lets positive infinity (wait for ever) through, even with a maximum."""
    assert check_number("t", float("inf"), minimum=0, maximum=10, allow_inf=True) == float("inf")


def test_shown_values_are_short_and_never_fail():
    """shown() truncates long reprs and describes ints too long for Python to print."""
    assert shown("x" * 10) == repr("x" * 10)
    assert shown("x" * 1000).endswith("... (1002 characters)")
    assert shown(10**5000) == "<int of 16610 bits>"
    with pytest.raises(ConfigError, match=r"'n' must be at most 3 \(got <int of 16610 bits>\)"):
        check_int("n", 10**5000, maximum=3)
