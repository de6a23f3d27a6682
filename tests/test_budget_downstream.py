"""The budgets benchmark's downstream (refusing past its rate, and for an outage) and its
recovery figures, without Kafka: what the benchmark's numbers rest on."""

from __future__ import annotations

import pytest

from benchmarks._downstream import Downstream, call
from benchmarks.budget_priority import _most_in_1s, _recovery_figures


@pytest.mark.timeout(60)
def test_downstream_refuses_past_its_rate_and_during_an_outage() -> None:
    with Downstream(limit=20.0) as downstream:  # a bucket of 1 token, 50 ms a token
        statuses = [call(downstream.port, "/call")[0] for _ in range(5)]
        assert statuses[0] == 200 and 429 in statuses[1:]
        downstream.outage(30.0)
        status, retry_after, _ = call(downstream.port, "/call")
        assert status == 429 and retry_after is not None and 29 < retry_after <= 30
        accepted, refused = downstream.stats()
        assert len(accepted) == statuses.count(200) and refused == 5 - len(accepted) + 1


def test_recovery_figures() -> None:
    limit = 100.0
    # 100 calls/s before the outage (from 0 to 8 s), none during it (8 to 9 s), then 50/s for
    # 2 s and 100/s again from 11 s.
    accepted = [i / 100 for i in range(800)] + [9 + i / 50 for i in range(100)] + [
        11 + i / 100 for i in range(500)]
    rates = [(8.0, 100.0), (9.0, 50.0), (10.0, 60.0), (12.5, 100.0)]
    figures = _recovery_figures(limit, accepted, 0.0, outage_at=8.0, outage_end=9.0,
                                rates=rates, warmup=3.0)
    assert figures["accepted_per_s_before"] == 100.0
    assert figures["budget_rate_lowest"] == 50.0
    assert figures["budget_full_rate_s"] == 3.5
    # (10.89, 11.89] holds 5 calls at 50/s and 90 at 100/s: 95 % of the rate before.
    assert figures["downstream_back_s"] == pytest.approx(2.89)


def test_most_started_in_any_second() -> None:
    assert _most_in_1s([]) == 0
    # (0, 1] holds 0.5, 0.99 and 1.0; 0 is out, as the downstream's windows count.
    assert _most_in_1s([0.0, 0.5, 0.99, 1.0, 1.5, 3.0]) == 3
