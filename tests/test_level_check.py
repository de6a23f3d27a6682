"""Levels are checked against the broker, never assumed (kafka-python family; issue 37 items 1
and 7): a consumer with too few levels fails at subscribe() naming the unread topics, one
without max_priority reads the levels the broker has, a producer never creates a level topic,
and bad arguments fail at the call naming them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from priority_kafka import (
    ConfigError,
    MissingTopicsError,
    PriorityConsumer,
    PriorityProducer,
    create_priority_topics,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def four_levels(bootstrap_servers, unique_name):
    """A logical topic with four levels, 100 records in each."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 4)
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=4) as p:
        for level in range(4):
            for i in range(100):
                p.send(name, f"{level}:{i}".encode(), priority=level)
        p.flush()
    return name


def _consumer(servers, *topics, **configs):
    return PriorityConsumer(*topics, bootstrap_servers=servers, auto_offset_reset="earliest",
                            consumer_timeout_ms=5000, **configs)


def _topics(servers):
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_too_few_levels_fail_at_subscribe_naming_the_unread_topic(
    bootstrap_servers, four_levels, unique_name
):
    """max_priority=3 on a four-level topic read 300 of 400 (the top level never) and said
    nothing; now subscribe() fails naming the level it would never read."""
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        _consumer(bootstrap_servers, four_levels, max_priority=3, group_id=unique_name("g"))
    assert time.monotonic() - started < 10
    assert str(caught.value).startswith(
        f"{four_levels}-3 exists but max_priority=3 reads only {four_levels}-0..{four_levels}-2"
    )
    assert not isinstance(caught.value, MissingTopicsError)
    # Subscribing later is checked the same way.
    with _consumer(bootstrap_servers, max_priority=3) as c, pytest.raises(
        ConfigError, match=f"{four_levels}-3 exists"
    ):
        c.subscribe([four_levels])


def test_levels_are_discovered_from_the_broker(bootstrap_servers, four_levels, unique_name):
    """Without max_priority the consumer reads every level the topic has: all 400 records."""
    with _consumer(bootstrap_servers, four_levels, group_id=unique_name("g")) as c:
        assert c.max_priority == 4
        levels = Counter(int(r.topic.rsplit("-", 1)[1]) for r in c)
    assert levels == {0: 100, 1: 100, 2: 100, 3: 100}


def test_more_levels_than_exist_name_the_missing_ones(bootstrap_servers, unique_name):
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3)
    with pytest.raises(MissingTopicsError) as caught:
        _consumer(bootstrap_servers, name, max_priority=5)
    assert str(caught.value).startswith(f"topics {name}-3, {name}-4 do not exist; create them "
                                        f"with `priority-kafka topics create {name}")


def test_a_missing_topic_says_how_to_create_it(bootstrap_servers, unique_name):
    name = unique_name("absent")
    started = time.monotonic()
    with pytest.raises(MissingTopicsError, match=f"'{name}' has no priority topics .*"
                       f"priority-kafka topics create {name}"):
        _consumer(bootstrap_servers, name)
    assert time.monotonic() - started < 10
    assert not [t for t in _topics(bootstrap_servers) if t.startswith(name)]


def test_a_pattern_matching_an_unread_level_fails(bootstrap_servers, four_levels):
    with _consumer(bootstrap_servers, max_priority=3) as c, pytest.raises(
        ConfigError, match=f"{four_levels}-3 matches pattern"
    ):
        c.subscribe(pattern=four_levels[:-2] + ".*")


def test_a_producer_never_creates_a_level_topic(bootstrap_servers, unique_name):
    """max_priority=5 sending priority=4 to a three-level topic made the broker create
    <topic>-4; now the send fails naming the topic's levels and nothing is created."""
    name = unique_name("payments")
    create_priority_topics(bootstrap_servers, name, 3)
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=5) as p:
        p.send(name, b"ok", priority=2).get(timeout=30)
        with pytest.raises(MissingTopicsError) as caught:
            p.send(name, b"lost", priority=4)
        assert str(caught.value).startswith(
            f"{name}-4 does not exist ('{name}' has levels {name}-0..{name}-2 on the broker)"
        )
        # A level created later is found on the next send to it (a miss asks again).
        create_priority_topics(bootstrap_servers, name, 5)
        deadline = time.monotonic() + 10
        while True:
            try:
                p.send(name, b"now", priority=4).get(timeout=30)
                break
            except MissingTopicsError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
    absent = unique_name("absent")
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p, \
            pytest.raises(MissingTopicsError, match="has no level topics"):
        p.send(absent, b"x", priority=1)
    assert not [t for t in _topics(bootstrap_servers) if t.startswith(absent)]


def test_every_entry_point_names_the_bad_argument(bootstrap_servers, unique_name):
    """Item 7: a distributor of the wrong signature, a topics argument that is neither a str
    nor an iterable of str, and priority=None each fail at the call, naming argument and
    value."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3)

    def one_argument(max_priority):
        return {}

    with pytest.raises(ConfigError, match="'max_poll_records_distributor' must take two "
                       r"arguments .*one_argument.*\(max_priority\)"):
        _consumer(bootstrap_servers, name, max_poll_records_distributor=one_argument)
    with _consumer(bootstrap_servers, max_priority=3) as c:
        for bad in (5, [name, 7], None):
            with pytest.raises(ConfigError, match=rf"'topics' must be a str or an iterable of "
                               rf"str \(got {re.escape(repr(bad))}"):
                c.subscribe(bad)
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
        with pytest.raises(ConfigError, match=r"'priority' must be an integer .* \(got None\)"):
            p.send(name, b"x", priority=None)
        p.send(name, b"x").get(timeout=30)  # omitted: default_priority


# -- the CLI ------------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent


def _cli(*argv: str, timeout_s: float = 60, **env: str) -> tuple[int, str, float]:
    """Run ``python -m priority_kafka`` with this checkout: (status, stderr, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "priority_kafka", *argv], capture_output=True, text=True,
        timeout=timeout_s, check=False,
        env={**os.environ, **env,
             "PYTHONPATH": os.pathsep.join((str(TESTS), str(TESTS.parent)))},
    )
    return done.returncode, done.stderr, time.monotonic() - started


def test_consume_and_lag_on_a_missing_topic_say_so_within_seconds(bootstrap_servers,
                                                                  unique_name):
    """`consume` ran 120 s handling 0 and `lag` printed `total lag 0 ()` with exit 0; both now
    exit 2 at once naming the topics and how to create them."""
    name = unique_name("absent")
    for argv in (["consume", "cli_handler:handle", "-t", name, "-g", "g", "-n", "3"],
                 ["consume", "cli_handler:handle", "-t", name, "-g", "g"],
                 ["lag", name, "-g", "g"]):
        status, err, seconds = _cli(*argv, "-b", bootstrap_servers)
        assert status == 2, err
        assert "do not exist" in err or "has no priority topics" in err, err
        assert f"create them with `priority-kafka topics create {name} --max-priority" in err
        assert len(err.strip().splitlines()) == 1, err
        assert seconds < 15, (argv, seconds)
    assert not [t for t in _topics(bootstrap_servers) if t.startswith(name)]


def test_consume_without_max_priority_reads_every_level(bootstrap_servers, four_levels,
                                                        unique_name, tmp_path):
    """Without --max-priority `consume` reads the levels the topic has (all 400, level 3
    included); with a --max-priority below them it refuses, naming the unread topic."""
    status, err, _ = _cli("consume", "cli_handler:handle", "-t", four_levels, "-g", "g",
                          "-n", "3", "-b", bootstrap_servers)
    assert status == 2 and f"{four_levels}-3 exists but --max-priority=3" in err, err
    out = tmp_path / "handled.txt"
    status, err, _ = _cli("consume", "cli_handler:handle", "-t", four_levels,
                          "-g", unique_name("g"), "--max-records", "400", "--duration", "60",
                          "--quiet", "-b", bootstrap_servers, timeout_s=120,
                          CLI_HANDLER_OUT=str(out))
    assert status == 0, err
    assert len(set(out.read_text().splitlines())) == 400


def test_wait_for_topics_warns_while_waiting(bootstrap_servers, unique_name):
    """With --wait-for-topics, `lag` on a missing topic warns (again and again) until the
    topics exist, then reports."""
    name = unique_name("later")
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "lag", name, "-g", "g", "--wait-for-topics",
         "-b", bootstrap_servers, "--json"],
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        warnings = []
        while len(warnings) < 2:
            line = process.stderr.readline()
            assert line, process.stderr.read()
            warnings.append(line)
        assert all(f"'{name}' has no priority topics" in w and "--wait-for-topics" in w
                   for w in warnings), warnings
        create_priority_topics(bootstrap_servers, name, 2)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert json.loads(out)["levels"] == {"1": 0, "0": 0}
