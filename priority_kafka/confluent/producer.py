"""PriorityProducer: confluent-kafka's Producer that routes each message to its priority topic."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from numbers import Integral
from typing import Any

from confluent_kafka import KafkaException, Producer

from priority_kafka._checks import check_int
from priority_kafka._levels import ProducerFront
from priority_kafka._properties import INT, typed
from priority_kafka._topic_levels import TopicLevels
from priority_kafka.confluent._config import (
    InvalidArgError,
    invalid_arg,
    merge,
    named_property,
    pop_own,
)
from priority_kafka.confluent._login import LoginWatch
from priority_kafka.confluent._metadata import listed_topics
from priority_kafka.confluent._renewal import BrokerWatch, close_abandoned, watch_statistics
from priority_kafka.naming import priority_topics

Router: type[_routing.Router] | None
try:  # the C build of produce()'s common path (setup.py); optional, Python does the same
    from priority_kafka.confluent import _routing

    Router = _routing.Router
except ImportError:  # pragma: no cover - only without a C compiler at install time
    Router = None

__all__ = ["PriorityProducer"]

log = logging.getLogger(__name__)

# poll() and flush() wait in slices of this long, to look at what the error callback saw.
_SLICE_S = 0.2

#: ``produce()``'s priority when none is given (an explicit None is refused).
DEFAULT: Any = object()


class PriorityProducer(ProducerFront):
    """Produce to priority topics with ``confluent_kafka.Producer``'s API.

    ``PriorityProducer({"bootstrap.servers": ..., "max.priority": 3})``; every other librdkafka
    producer property passes through, plus ``default.priority`` (the level ``produce`` uses
    when given none, default 0). ``produce("orders", value, priority=2)`` produces to
    ``orders-2``. One librdkafka producer serves every level, so its batching, retries,
    idempotence and per-partition ordering hold unchanged. Once a topic is routed,
    ``produce`` runs in C when the optional extension is built (see ``_routing.c``), with the
    same effect as the Python method below.

    Never creates a level topic: ``produce`` checks that the level topic exists, from the
    cluster's topic list, asked when a topic is first produced to, when a level not seen is
    named and, from ``poll()`` or ``flush()``, every 5 minutes (produces to known levels are
    a dict look-up).

    A handle that lost every broker for good (librdkafka issue #5301: it never dials again,
    and nothing is delivered or reported) is seen in its statistics (every
    ``statistics.interval.ms``, 5 s unless set) and replaced by ``poll()`` or ``flush()``
    with a new one of the same configuration, with a warning: the messages the lost handle
    held fail to their delivery callbacks (``_PURGE_QUEUE``/``_PURGE_INFLIGHT``, as
    ``purge()`` reports) instead of never being reported, and what is produced next is
    delivered. A transactional producer is not replaced (its transaction cannot go on in
    another handle): an error says to make a new one.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        librdkafka = merge(config, kwargs)
        with invalid_arg():
            # A string (a .properties file, a command line) is a value, as librdkafka's are.
            self._max_priority = check_int(
                "max.priority", typed("max.priority", pop_own(librdkafka, "max.priority"), INT),
                minimum=1,
            )
            default = typed("default.priority", pop_own(librdkafka, "default.priority"), INT)
            self._default_priority = check_int(
                "default.priority", 0 if default is None else default,
                minimum=0, maximum=self._max_priority - 1,
            )
        # An unreachable cluster: poll() and flush() raise it.
        self._login = LoginWatch.of(librdkafka)
        librdkafka["error_cb"] = self._login.error_cb()
        self._watch = BrokerWatch(self._lost_brokers, watch_statistics(librdkafka))
        librdkafka["stats_cb"] = self._watch
        self._config = librdkafka
        self._renew_due = False
        # Logical topic -> {priority: its priority topic}, None for the default priority:
        # built and checked once per topic, so produce() is one look-up on top of librdkafka.
        self._routes: dict[str, dict[int | None, str]] = {}
        self._topic_levels = TopicLevels(
            lambda: listed_topics(self._producer, self._serve)
        )
        self._routes_until = -float("inf")
        with named_property():
            self._connect()

    def _connect(self) -> None:
        """A librdkafka producer of this configuration, and ``produce`` sending to it."""
        self._producer = Producer(self._config)
        self._produce = self._producer.produce
        if Router is not None:
            # Shadows the method below for this instance: a Python frame around librdkafka's
            # call costs half the call again; the router forwards routed calls in C and hands
            # every other one (first use of a topic, bad priority) to the method.
            self.produce = Router(self._routes, self._produce, self._python_produce)  # type: ignore[method-assign]

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
        priority: int = DEFAULT,
        callback: Callable[[Any, Any], None] | None = None,
    ) -> None:
        """Produce a message to ``<topic>-<priority>`` (asynchronously, as ``Producer.produce``).

        Without ``priority``, ``default.priority``. A priority outside ``[0, max.priority)``
        (None included) raises :class:`InvalidArgError` (a ``KafkaException``), and one whose
        level topic does not exist :class:`~priority_kafka.MissingTopicsError` naming the
        topic's levels; nothing is produced.
        """
        key_of = None if priority is DEFAULT else priority
        # bool and float priorities hash like ints: only int and the default use the look-up.
        if priority is DEFAULT or priority.__class__ is int:
            try:
                name = self._routes[topic][key_of]
            except (KeyError, TypeError):  # new topic or level, bad priority, unhashable topic
                name = self._route(topic, key_of, priority is DEFAULT)
        else:
            name = self._route(topic, priority, False)
        if on_delivery is None:
            on_delivery = callback
        # confluent-kafka's positional order: topic, value, key, partition, callback,
        # on_delivery (its alias, used only when callback is NULL, not None), timestamp, headers.
        self._produce(name, value, key, partition, on_delivery, on_delivery, timestamp, headers)

    _python_produce = produce  # the router's fallback, whatever shadows ``produce``

    def _route(self, topic: str, priority: object, default: bool) -> str:
        """The priority topic of ``topic`` at ``priority`` (``default``: the default level),
        checking both and that it exists; remembers it."""
        with invalid_arg():
            names = priority_topics(topic, self._max_priority)  # highest level first
        if not default and (
            isinstance(priority, bool)
            or not isinstance(priority, Integral)
            or not 0 <= int(priority) < self._max_priority
        ):
            raise InvalidArgError(
                f"'priority' must be an integer in [0, {self._max_priority}) for "
                f"max.priority={self._max_priority} (got {priority!r}); nothing was produced."
            )
        level = self._default_priority if default else int(priority)  # type: ignore[call-overload]
        self._expire_routes()
        levels = self._topic_levels.check(topic, level)
        self._routes_until = self._topic_levels.fresh_until()
        # Every level the topic has, so the next produce() to any of them takes the look-up.
        routes: dict[int | None, str] = {
            n: names[self._max_priority - 1 - n] for n in levels if n < self._max_priority
        }
        if self._default_priority in routes:
            routes[None] = routes[self._default_priority]
        self._routes[topic] = routes
        return routes[level]

    def _expire_routes(self) -> None:
        # The C router reads _routes itself: stale routes are dropped here (from poll(),
        # flush() and each miss), so the next produce() to each level checks it again.
        if time.monotonic() > self._routes_until:
            self._routes.clear()

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery callbacks; returns how many were served (as ``Producer.poll``).

        Raises ``KafkaException`` once the cluster cannot be reached (every bootstrap address
        refused for a second before any was reached, or one is a TLS listener and this client
        speaks plaintext), after purging the queued messages (their delivery callbacks are
        served, with ``_PURGE_QUEUE``) and closing the producer."""
        self._expire_routes()
        return self._sliced(lambda t: self._producer.poll(t), timeout, lambda served: served > 0)

    def flush(self, timeout: float = -1) -> int:
        """Wait for every queued message; returns how many are still queued. Raises as
        :meth:`poll` when the cluster cannot be reached."""
        self._expire_routes()
        return self._sliced(lambda t: self._producer.flush(t), timeout,
                            lambda queued: queued == 0)

    def _sliced(self, call: Callable[[float], int], timeout: float,
                done: Callable[[int], bool]) -> int:
        """``call(timeout)`` in slices of at most ``_SLICE_S``, asking the watch in between."""
        if timeout.__class__ not in (int, float):
            return call(timeout)  # librdkafka's own error for a bad timeout
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            wait = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            result = call(max(wait, 0))
            if self._renew_due:
                self._renew()
            if done(result) or wait <= 0 or (deadline is not None and wait < _SLICE_S):
                return result
            if self._login.count:
                self._check_login()

    def _serve(self) -> None:
        """Serve callbacks (delivery reports, errors, log lines) and :meth:`_check_login`:
        produce() waiting for the topic list names a cluster it cannot reach."""
        self._producer.poll(0)
        if self._renew_due:
            self._renew()
        self._check_login()

    def _lost_brokers(self) -> None:
        # The statistics callback, served inside poll() or flush(): they renew after it.
        self._renew_due = True

    def _renew(self) -> None:
        """Replace a handle that lost every broker for good; fail what it held."""
        self._renew_due = False
        if "transactional.id" in self._config:
            log.error("the transactional producer lost every broker for good (librdkafka "
                      "issue #5301): its transaction cannot go on; abort it and make a new "
                      "producer (the executor's transactional_producer factory does so)")
            return
        old = self._producer
        self._config["stats_cb"] = self._watch = self._watch.retire()
        self._connect()
        old.purge(True, True, False)
        old.poll(0)  # the held messages' delivery callbacks, on the caller's thread
        log.warning("the producer lost every broker for good (librdkafka issue #5301: no "
                    "broker left in its statistics): replaced by a new one; the messages it held "
                    "fail to their delivery callbacks")
        close_abandoned("producer", old)

    def _check_login(self) -> None:
        try:
            self._login.check()
        except KafkaException:
            if self._login.unreachable is not None:
                self._producer.purge(True, True, False)
                self._producer.poll(0)  # the purged messages' delivery callbacks
                self._producer.close()
            raise

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge queued (and in-flight) messages, as ``Producer.purge``."""
        self._producer.purge(in_queue, in_flight, blocking)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata (``ClusterMetadata``), of one Kafka topic or all."""
        return self._producer.list_topics(topic, timeout)

    def close(self) -> bool:
        """Close the producer (as ``Producer.close``: flush first if you need delivery)."""
        return self._producer.close()

    def __len__(self) -> int:
        return len(self._producer)

    def __bool__(self) -> bool:
        return True  # as Producer: an empty queue does not make the producer falsy

    def __enter__(self) -> PriorityProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PriorityProducer(max_priority={self._max_priority})"
