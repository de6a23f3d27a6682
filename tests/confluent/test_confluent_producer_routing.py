"""PriorityProducer.produce's C router against its Python method, over a recording Producer.

The router forwards the caller's arguments to librdkafka's ``produce`` in their own form and
hands every call it is unsure of to the Python method; these tests hold the two paths to the
same effect (what librdkafka is asked to produce, or the exception raised) over a grid of
calls. The real client is covered by test_confluent_producer.py against the broker.
"""

from __future__ import annotations

import inspect
import itertools
import tracemalloc
import types
from typing import Any

import pytest

from priority_kafka.confluent import InvalidArgError
from priority_kafka.confluent import producer as producer_module
from priority_kafka.confluent.producer import PriorityProducer

_NOT_GIVEN = object()


class RecordingProducer:
    """confluent_kafka.Producer's produce() signature and alias rule, recording each call."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.calls: list[tuple] = []

    def produce(self, topic, value=None, key=None, partition=-1, callback=_NOT_GIVEN,
                on_delivery=_NOT_GIVEN, timestamp=0, headers=None) -> None:
        # librdkafka's binding: on_delivery is used only when callback was not passed at all.
        delivery = on_delivery if callback is _NOT_GIVEN else callback
        delivery = None if delivery is _NOT_GIVEN else delivery
        self.calls.append((topic, value, key, partition, delivery, timestamp, headers))

    def list_topics(self, topic=None, timeout=-1):
        """The cluster's topics: three levels of "orders" and of "payments"."""
        names = [f"{t}-{level}" for t in ("orders", "payments") for level in range(3)]
        return types.SimpleNamespace(topics=dict.fromkeys(names))


@pytest.fixture
def make_producer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(producer_module, "Producer", RecordingProducer)
    return lambda: PriorityProducer({"max.priority": 3, "default.priority": 1})


def test_the_c_router_is_built() -> None:
    """This project's install builds it (setup.py); without a C compiler produce() still works,
    in Python, at about 0.7 of librdkafka's call rate instead of 0.9."""
    assert producer_module.Router is not None, "priority_kafka.confluent._routing is not built"


def test_produce_shows_the_python_methods_signature(make_producer) -> None:
    """inspect.signature() and help() see the parameters of the method the router stands for."""
    producer = make_producer()
    assert isinstance(producer.produce, producer_module.Router)
    assert inspect.signature(producer.produce) == inspect.signature(producer._python_produce)
    assert "priority" in inspect.signature(producer.produce).parameters


def _outcome(call, args: tuple, kwargs: dict) -> object:
    try:
        call(*args, **kwargs)
    except (InvalidArgError, TypeError) as error:
        return type(error), str(error) if isinstance(error, InvalidArgError) else None
    return "ok"


def _cb(err: object, msg: object) -> None: ...


PRIORITIES = [_NOT_GIVEN, None, 0, 1, 2, 3, -1, True, 1.0, "2", 2**70]
TOPICS = ["orders", "payments", "bad topic", 7, None]
EXTRAS: list[tuple[tuple, dict]] = [
    ((), {}),
    ((b"k",), {}),
    ((b"k", 0, _cb), {}),
    ((), {"key": b"k", "headers": [("h", b"1")], "timestamp": 5}),
    ((), {"on_delivery": _cb}),
    ((), {"callback": _cb}),
    ((), {"callback": None, "on_delivery": _cb}),
    ((b"k", 0, _cb, 9, [("h", b"2")]), {}),  # past the five positionals both signatures share
    ((), {"bogus": 1}),
]


@pytest.mark.parametrize("warm", [False, True], ids=["first-use", "routed"])
def test_router_and_python_method_have_the_same_effect(make_producer, warm: bool) -> None:
    """Every call of the grid (topic x priority x other arguments) asks librdkafka for the same
    message, or raises the same error, through the router as through the Python method; routed
    topics (warm) take the router's C path, others its hand-over to Python."""
    routed, python = make_producer(), make_producer()
    assert producer_module.Router is not None
    for p in (routed, python):
        if warm:
            for topic in ("orders", "payments"):
                p._python_produce(topic, b"warm")  # the default level
                for priority in (0, 1, 2):
                    p._python_produce(topic, b"warm", priority=priority)
        p._producer.calls.clear()
    for topic, priority, (extra_args, extra_kwargs) in itertools.product(
        TOPICS, PRIORITIES, EXTRAS
    ):
        args = (topic, b"v", *extra_args)
        kwargs = dict(extra_kwargs)
        if priority is not _NOT_GIVEN:
            kwargs["priority"] = priority
        case = (args, kwargs)
        assert _outcome(routed.produce, args, kwargs) == _outcome(
            python._python_produce, args, kwargs
        ), case
        assert routed._producer.calls == python._producer.calls, case
    # Produced: 2 good topics x 4 good priorities (absent, 0, 1, 2) x 8 argument forms; an
    # explicit None is refused, naming it.
    assert len(routed._producer.calls) == 2 * 4 * 8


def test_routed_calls_take_the_c_path(make_producer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a topic is routed, produce() with an int or no priority never enters Python."""
    producer = make_producer()
    producer.produce("orders", b"first", priority=2)  # routes "orders"
    entered: list[tuple] = []
    monkeypatch.setattr(PriorityProducer, "_route", lambda self, *a: entered.append(a))
    producer.produce("orders", b"first")  # routes the default level
    for priority in (0, 1, 2):
        producer.produce("orders", b"v", priority=priority)
        producer.produce("orders", b"v", b"k", priority=priority, headers=None)
    producer.produce("orders", b"v")
    assert entered == []
    assert [call[0] for call in producer._producer.calls] == (
        ["orders-2", "orders-1"] + ["orders-0"] * 2 + ["orders-1"] * 2 + ["orders-2"] * 2
        + ["orders-1"]
    )


def test_router_keeps_no_memory_per_call(make_producer) -> None:
    """The router's references are balanced: 200,000 routed calls grow nothing."""
    producer = make_producer()
    producer._producer.calls = type("Sink", (), {"append": lambda self, call: None})()
    produce = producer.produce
    produce("orders", b"v", priority=0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200_000):
            produce("orders", b"v", key=b"k", priority=i % 3)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64_000, grown
