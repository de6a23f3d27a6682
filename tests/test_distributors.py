"""Tests for priority_kafka.distributors: splitting max_poll_records over priority levels."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.distributors import (
    ExponentialDistributor,
    LinearDistributor,
    WeightedDistributor,
    distribute,
)
from priority_kafka.errors import ConfigError

max_priorities = st.integers(min_value=1, max_value=8)
weight_lists = st.lists(
    st.one_of(
        st.integers(min_value=1, max_value=100),
        st.floats(min_value=0.01, max_value=100, allow_nan=False, allow_infinity=False),
    ),
    min_size=1,
    max_size=8,
)


def builtins_for(max_priority):
    """The three built-in distributors for ``max_priority`` levels (weights 1, 3, 5, ...)."""
    return [
        ExponentialDistributor(),
        LinearDistributor(),
        WeightedDistributor([2 * level + 1 for level in range(max_priority)]),
    ]


def test_exponential_matches_the_design_example():
    """N=3, M=50 splits as {2: 29, 1: 14, 0: 7}, highest level first."""
    quotas = ExponentialDistributor()(3, 50)
    assert quotas == {2: 29, 1: 14, 0: 7}
    assert list(quotas) == [2, 1, 0]


def test_linear_weights_levels_one_two_three():
    """Linear N=3, M=50: floor(50/6)=8, floor(100/6)=16, the top gets the remaining 26."""
    assert LinearDistributor()(3, 50) == {2: 26, 1: 16, 0: 8}


def test_weighted_floors_lower_levels_and_gives_the_top_the_rest():
    """Weights [1, 2, 5], M=50: floor(50/8)=6, floor(100/8)=12, the top gets 32."""
    assert WeightedDistributor([1, 2, 5])(3, 50) == {2: 32, 1: 12, 0: 6}


def test_float_weights_are_read_as_decimals():
    """Weights [0.7, 0.3] split 10 records as 7 + 3, not 6 + 4 from binary rounding."""
    assert WeightedDistributor([0.7, 0.3])(2, 10) == {1: 3, 0: 7}


def test_exponential_minimum_message():
    """Too few records for the levels is a ConfigError saying the minimum and the value."""
    message = "'max_poll_records' must be at least 7 for 3 priority levels (got 5)."
    with pytest.raises(ConfigError, match=re.escape(message)):
        ExponentialDistributor()(3, 5)


@pytest.mark.parametrize(
    ("distributor", "max_priority", "minimum"),
    [
        (ExponentialDistributor(), 3, 7),
        (ExponentialDistributor(), 5, 31),
        (LinearDistributor(), 3, 6),
        (LinearDistributor(), 4, 10),
        (WeightedDistributor([1, 2, 5]), 3, 8),
        # The top level's remainder is never 0, so a small top weight does not raise the minimum.
        (WeightedDistributor([5, 2, 1]), 3, 4),
        (ExponentialDistributor(), 1, 1),
    ],
)
def test_minimum_records(distributor, max_priority, minimum):
    """minimum_records is the exponential S, the linear N(N+1)/2, or ceil(S / min lower weight)."""
    assert distributor.minimum_records(max_priority) == minimum
    assert min(distributor(max_priority, minimum).values()) >= 1
    if minimum > 1:
        with pytest.raises(ConfigError, match=rf"at least {minimum} .*\(got {minimum - 1}\)"):
            distributor(max_priority, minimum - 1)


@given(max_priorities, st.integers(min_value=1, max_value=10_000))
def test_builtins_sum_to_max_poll_records(max_priority, slack):
    """Every built-in split sums to max_poll_records and gives every level at least 1."""
    for distributor in builtins_for(max_priority):
        records = distributor.minimum_records(max_priority) - 1 + slack
        quotas = distributor(max_priority, records)
        assert list(quotas) == list(range(max_priority - 1, -1, -1))
        assert sum(quotas.values()) == records
        assert min(quotas.values()) >= 1


@given(max_priorities, st.integers(min_value=0, max_value=10_000))
def test_exponential_and_linear_are_monotone_in_level(max_priority, slack):
    """A higher level never gets a smaller quota than a lower one (exponential and linear)."""
    for distributor in (ExponentialDistributor(), LinearDistributor()):
        records = distributor.minimum_records(max_priority) + slack
        quotas = distributor(max_priority, records)
        assert all(quotas[level] <= quotas[level + 1] for level in range(max_priority - 1))


@given(weight_lists, st.integers(min_value=0, max_value=10_000))
def test_weighted_is_smallest_possible_minimum(weights, slack):
    """At the minimum every level gets >= 1, one record fewer some level gets 0 (or it raises)."""
    distributor = WeightedDistributor(weights)
    n = len(weights)
    minimum = distributor.minimum_records(n)
    quotas = distributor(n, minimum + slack)
    assert sum(quotas.values()) == minimum + slack
    assert min(quotas.values()) >= 1
    exact = [Fraction(str(w)) for w in weights]
    # Independent check of the bound: one record below it, a lower level would floor to 0.
    if minimum > 1:
        assert any(math.floor((minimum - 1) * w / sum(exact)) == 0 for w in exact[:-1])


@given(max_priorities, st.integers(min_value=0, max_value=10_000))
def test_exponential_and_linear_are_weighted_special_cases(max_priority, slack):
    """Exponential equals weights 2**i and linear equals weights i + 1."""
    for distributor, weights in (
        (ExponentialDistributor(), [2**level for level in range(max_priority)]),
        (LinearDistributor(), [level + 1 for level in range(max_priority)]),
    ):
        records = distributor.minimum_records(max_priority) + slack
        assert distributor(max_priority, records) == WeightedDistributor(weights)(
            max_priority, records
        )


def test_reprs_say_what_they_are():
    """Each distributor's repr is the expression that builds it."""
    assert repr(ExponentialDistributor()) == "ExponentialDistributor()"
    assert repr(LinearDistributor()) == "LinearDistributor()"
    assert repr(WeightedDistributor((1, 2, 5))) == "WeightedDistributor([1, 2, 5])"


def test_distributors_compare_and_hash_by_value():
    """Equal configurations are equal and hash alike; different ones are not equal."""
    assert ExponentialDistributor() == ExponentialDistributor()
    assert WeightedDistributor([1, 2]) == WeightedDistributor((1, 2))
    assert hash(WeightedDistributor([1, 2])) == hash(WeightedDistributor((1, 2)))
    assert WeightedDistributor([1, 2]) != WeightedDistributor([2, 1])
    assert ExponentialDistributor() != LinearDistributor()


@pytest.mark.parametrize("weights", [[], [0], [1, -2], [True], ["1"], "12", [math.nan], [math.inf]])
def test_bad_weights_are_rejected_naming_them(weights):
    """Weights must be a non-empty sequence of positive finite numbers."""
    with pytest.raises(ConfigError, match=rf"'weights'.*\(got .*{re.escape(repr(weights))}\)"):
        WeightedDistributor(weights)


def test_weight_count_must_equal_max_priority():
    """A weighted distributor called for a different number of levels is a ConfigError."""
    with pytest.raises(ConfigError, match=r"WeightedDistributor\(\[1, 2\]\) has 2 weights.* 3 "):
        WeightedDistributor([1, 2])(3, 50)


@pytest.mark.parametrize(
    ("max_priority", "max_poll_records", "name"),
    [
        (0, 50, "max_priority"),
        (3.0, 50, "max_priority"),
        (3, 0, "max_poll_records"),
        (3, True, "max_poll_records"),
        (3, "50", "max_poll_records"),
    ],
)
def test_bad_arguments_are_rejected_naming_them(max_priority, max_poll_records, name):
    """Both the distributors and distribute reject a non-int or non-positive argument."""
    bad = max_priority if name == "max_priority" else max_poll_records
    pattern = rf"'{name}'.*\(got {re.escape(repr(bad))}\)"
    with pytest.raises(ConfigError, match=pattern):
        ExponentialDistributor()(max_priority, max_poll_records)
    with pytest.raises(ConfigError, match=pattern):
        distribute(ExponentialDistributor(), max_priority, max_poll_records)


def test_distribute_accepts_any_callable_and_orders_highest_first():
    """A user function's quotas come back as a new dict, highest level first."""
    given_back = {0: 1, 1: 2, 2: 7}

    def lowest_first(max_priority, max_poll_records):
        return given_back

    quotas = distribute(lowest_first, 3, 10)
    assert quotas == given_back
    assert list(quotas) == [2, 1, 0]
    assert quotas is not given_back


def test_distribute_allows_zero_quotas():
    """A user distributor may starve a level on purpose (strict priority)."""
    assert distribute(lambda n, m: {1: m, 0: 0}, 2, 10) == {1: 10, 0: 0}


@given(max_priorities, st.integers(min_value=1, max_value=10_000))
def test_distribute_returns_what_a_builtin_returns(max_priority, slack):
    """distribute passes a valid split through unchanged."""
    distributor = ExponentialDistributor()
    records = distributor.minimum_records(max_priority) - 1 + slack
    assert distribute(distributor, max_priority, records) == distributor(max_priority, records)


def test_distribute_propagates_the_minimum_error():
    """A built-in's own ConfigError reaches the caller of distribute."""
    with pytest.raises(ConfigError, match=r"at least 7 for 3 priority levels \(got 5\)"):
        distribute(ExponentialDistributor(), 3, 5)


class Returns:
    """A distributor returning a fixed value, with a repr the error messages must show."""

    def __init__(self, value):
        self.value = value

    def __call__(self, max_priority, max_poll_records):
        return self.value

    def __repr__(self):
        return "Returns()"


@pytest.mark.parametrize(
    ("returned", "bad"),
    [
        ([5, 5], "[5, 5]"),
        ({0: 5}, "missing [1]"),
        ({0: 5, 1: 3, 2: 2}, "unknown [2]"),
        ({0: 5, 1: 5, -1: 0}, "unknown [-1]"),
        ({False: 5, 1: 5}, "unknown [False]"),
        ({0: 5, 1.0: 5}, "unknown [1.0]"),
        ({0: 5.0, 1: 5}, "5.0"),
        ({0: True, 1: 9}, "True"),
        ({0: -1, 1: 11}, "-1"),
        ({0: 5, 1: 4}, "summing to 9"),
    ],
)
def test_distribute_rejects_invalid_results_naming_them(returned, bad):
    """A result that is not exactly one non-negative int per level summing to M is rejected."""
    with pytest.raises(ConfigError, match=rf"Returns\(\).*{re.escape(bad)}"):
        distribute(Returns(returned), 2, 10)


def test_distribute_rejects_a_non_callable():
    """The distributor must be callable."""
    with pytest.raises(ConfigError, match=r"'distributor' must be a callable .* \(got 'exp'\)"):
        distribute("exp", 3, 50)
