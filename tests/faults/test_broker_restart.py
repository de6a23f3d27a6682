"""Fault: the broker restarts (SIGTERM and SIGKILL, same port and data) under a running
ShardedExecutor(PriorityConsumer) and a producer: nothing acknowledged is lost, and the
executor handles records again soon after the broker is back (measured with kafka-python's
``reconnect_backoff_max_ms`` default of 30 s and with this library's 1 s)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks._running import wait_for
from benchmarks._traffic import Tally
from priority_kafka.families import family as registered
from priority_kafka.testing import LocalKafkaBroker
from tests.conftest import names_having
from tests.faults.common import run_under_load

pytestmark = [pytest.mark.faults, pytest.mark.integration]

#: Caught up within this long after the broker is back, a restart at a time.
CAUGHT_UP_S = 10
#: ... unless a confluent level's handle lost every broker in the restart (librdkafka #5301)
#: and was renewed (priority_kafka.confluent._renewal): the renewal comes after two statistics
#: (5 s apart) or after the executor's commit_timeout_ms (60 s) if a commit was left blocked,
#: and the group gives the new member the level's partitions once the old member's session
#: (45 s) has ended.
RENEWED_CAUGHT_UP_S = 75


class Renewals(logging.Handler):
    """The confluent PriorityConsumer's warnings that it replaced a level's consumer."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def own_broker() -> Iterator[LocalKafkaBroker]:
    """A broker of this module alone, since it is restarted: each restart leaves it running
    with the same port and data, and each test has topics and groups of its own (one broker
    start for all, a CI saving)."""
    with LocalKafkaBroker({"num.partitions": 2}) as broker:
        yield broker


def restart_under_load(
    broker: LocalKafkaBroker, kills: list[bool], name: str, **client_configs: Any
) -> dict[str, Any]:
    """Restart the broker under load once per entry of ``kills`` (True: SIGKILL); return the
    figures and, per restart, how long until the first record and until caught up."""

    def restarts(tally: Tally) -> dict[str, Any]:
        recoveries: list[dict[str, Any]] = []
        for kill in kills:
            down = time.monotonic()
            renewals = Renewals()
            watched = logging.getLogger("priority_kafka.confluent._renewal")
            watched.addHandler(renewals)
            try:
                broker.restart(kill=kill)
                back = time.monotonic()
                wait_for(lambda back=back: tally.caught_up_after(back) is not None, 120,
                         "everything sent before the broker came back to be handled")
            finally:
                watched.removeHandler(renewals)
            recoveries.append({
                "signal": "SIGKILL" if kill else "SIGTERM",
                "down_s": round(back - down, 1),
                "first_record_s": round(tally.first_handled_after(back) or 0.0, 2),
                "caught_up_s": round(tally.caught_up_after(back) or 0.0, 2),
                "renewed": renewals.messages,
            })
            wait_for(lambda: tally.handled_count() >= len(tally.sent) - 300, 120, "steady state")
        return {"restarts": recoveries}

    return run_under_load(broker.bootstrap_servers, name, restarts, **client_configs)


def caught_up_in_time(restart: dict[str, Any]) -> bool:
    return restart["caught_up_s"] < (RENEWED_CAUGHT_UP_S if restart["renewed"] else CAUGHT_UP_S)


#: On the caller's loop (run_async()), a plain def handler runs on the worker threads: a path
#: of its own, measured with --faults-full (CI runs it in the crash loop, at less cost).
_DEF_ON_LOOP = pytest.mark.skipif(
    "not (config.getoption('--faults-full') or os.environ.get('PRIORITY_KAFKA_FAULTS_FULL'))",
    reason="run_async() with a def handler: the crash loop covers it in CI; --faults-full here",
)


@pytest.mark.parametrize(("client", "sync_handler"), [
    *(pytest.param(name, False, id=name)
      for name in [*names_having("synchronous"), *names_having("caller_loop")]),
    *(pytest.param(name, True, id=f"{name}-def", marks=_DEF_ON_LOOP)
      for name in names_having("caller_loop")),
])
def test_broker_restart_loses_nothing_and_recovers_within_seconds(
    own_broker: LocalKafkaBroker, faults_full: bool, fault_report: Any, client: str,
    sync_handler: bool,
) -> None:
    """SIGTERM and SIGKILL restarts of the broker under load (on the caller's loop, SIGKILL
    only unless --faults-full): 0 acknowledged records lost, no
    key out of order, and the executor (on each client family; on aiokafka ``run_async()`` in
    the caller's loop with an ``async def`` handler, and with a plain ``def`` one run on the
    worker threads, ``[aiokafka-def]``) has caught up within 10 s of the broker
    answering again (kafka-python: with the library's default reconnect backoff, 1 s); within
    75 s when a confluent level lost every broker in the restart and was renewed (see
    RENEWED_CAUGHT_UP_S)."""
    one = registered(client)
    # On the caller's loop, the SIGKILL alone by default (CI time); both, twice, at full size.
    kills = [False, True] * 2 if faults_full else [True] if one.caller_loop else [False, True]
    figures = restart_under_load(
        own_broker, kills, f"restart-{client}{'-def' if sync_handler else ''}", client=client,
        sync_handler=sync_handler,
    )
    # kafka-python's calls: with the library's default reconnect backoff (1 s).
    on_loop = f"{client}, run_async{', def handler' if sync_handler else ''}"
    name = (client if one.librdkafka else on_loop if one.caller_loop
            else f"{one.key('reconnect.backoff.max.ms')}=1000, the default")
    fault_report(f"broker restart ({name})", **figures)
    assert figures["lost"] == 0 and figures["send_failures"] == 0
    assert figures["order_violations"] == 0
    assert all(map(caught_up_in_time, figures["restarts"])), figures["restarts"]


# A skip mark, not pytest.skip() in the test: the broker fixture would start first.
@pytest.mark.skipif(
    "not (config.getoption('--faults-full') or os.environ.get('PRIORITY_KAFKA_FAULTS_FULL'))",
    reason="a measurement for docs/reliability.md, run with --faults-full",
)
def test_broker_restart_with_kafka_python_backoff(
    own_broker: LocalKafkaBroker, fault_report: Any
) -> None:
    """With kafka-python's own reconnect backoff (30 s maximum) nothing is lost either; the
    recovery time is what docs/consumer.md compares against."""
    figures = restart_under_load(
        own_broker, [False, True] * 2, "restart-kp", reconnect_backoff_max_ms=30000
    )
    fault_report("broker restart (reconnect_backoff_max_ms=30000, kafka-python's)", **figures)
    assert figures["lost"] == 0 and figures["send_failures"] == 0
