"""The chaos soak's own checks (benchmarks/_soak.py) on made-up samples: the leak check flags a
steady rise and nothing else, and the stall outside faults skips the faults' windows; and its
exactly-once output reader, on the broker, replaced when it stops reading."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaProducer

from benchmarks._common import create_topics
from benchmarks._running import wait_for
from benchmarks._soak import PARTITIONS, OutputReader, longest_stall_outside, resources
from benchmarks._traffic import Tally


def _samples(
    rss: list[float], threads: list[int], fds: list[int]
) -> list[tuple[float, float, int, int]]:
    return [(60.0 * i, r, t, f) for i, (r, t, f) in enumerate(zip(rss, threads, fds, strict=True))]


def test_the_leak_check_flags_a_steady_rise_not_a_dip_or_a_flat_line() -> None:
    """30 samples over 29 minutes: fds rising by one a minute and RSS by 2 MB a minute are
    leaks; threads that dip after the warm-up and come back, and a flat RSS, are not; a process
    sampled over less than 80 % of the run is not judged."""
    rising = _samples([100.0 + 2 * i for i in range(30)], [20] * 30, list(range(40, 70)))
    figures = resources(rising, run_s=29 * 60)
    assert figures["long_lived"] and figures["leak"] == ["rss_mb", "fds"]
    assert figures["fds"]["slope_per_h"] == 60.0
    dip = [20] * 7 + [12] * 3 + [20] * 20  # a short dip right after the warm-up
    flat = resources(_samples([100.0] * 30, dip, [40] * 30), run_s=29 * 60)
    assert flat["threads"]["fitted_rise"] > 1.5  # the fitted line alone would call it a leak
    assert flat["leak"] == []
    assert resources(rising, run_s=60 * 60)["leak"] == []  # 29 of 60 minutes: not long-lived
    assert resources(rising[:8], run_s=7 * 60)["leak"] == []  # 7 minutes: too short to judge


def test_a_stall_counts_only_outside_the_fault_windows() -> None:
    """Records of level 0 sent every second and handled at once, except a 10 s gap (records
    waiting from second 20 to 30): the stall is 10 s, or the 4 s left of it outside a fault
    window of seconds 20-26."""
    tally = Tally()
    for second in range(40):
        value = f"0:0:{second}"
        tally.sent[value] = float(second)
        tally.acked.add(value)
        tally.handle(value, 0, at=max(float(second), 30.0) if 20 <= second < 30 else second + 0.1)
    whole = longest_stall_outside(tally, 0, [], since=0.0)
    assert round(whole["stall_s"], 1) == 10.0 and round(whole["from"], 1) == 20.0
    outside = longest_stall_outside(tally, 0, [(20.0, 26.0)], since=0.0)
    assert round(outside["stall_s"], 1) == 4.0 and round(outside["from"], 1) == 26.0


class _Stuck:
    """A confluent consumer that returns nothing any more, as the soak's reader did."""

    closed = False

    def consume(self, num_messages: int, timeout: float) -> list[object]:
        return []

    def close(self) -> None:
        self.closed = True


@pytest.mark.integration
def test_an_output_reader_that_reads_nothing_is_replaced_and_goes_on_where_it_was(
    bootstrap_servers: str, unique_name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hour soaks' confluent output reader stopped reading for good after a fault, and the
    report took the outputs it never read for missing. A reader that read nothing for
    READER_RENEW_S is replaced by one going on from the offsets after what it read."""
    topic = unique_name("outputs")
    create_topics(bootstrap_servers, [topic], PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    values = [f"0:{key}:{seq}" for seq in range(5) for key in range(6)]

    def send(value: str) -> None:  # as the members' outputs: keyed, with their input record
        producer.send(topic, value.encode(), key=value.split(":")[1].encode(),
                      headers=[("source", f"in:0:{values.index(value)}".encode())])

    for value in values[:15]:
        send(value)
    producer.flush(30)
    reader = OutputReader(bootstrap_servers, topic)
    try:
        wait_for(lambda: reader.read() or reader.has(values[:15]), 60, "the first outputs")
        stuck = reader._consumer = _Stuck()
        for value in values[15:]:
            send(value)
        producer.flush(30)
        monkeypatch.setattr("benchmarks._soak.READER_RENEW_S", 0.2)
        wait_for(lambda: reader.read() or reader.has(values), 60, "the outputs after the stall")
        figures = reader.figures(set(values))
        assert (figures["missing"], figures["duplicated"], figures["order_breaks"],
                figures["reader_renewals"]) == (0, 0, 0, 1)
        wait_for(lambda: stuck.closed, 10, "the stuck reader to be closed")
    finally:
        producer.close()
        reader.close()

