"""The backends the client contract runs on: the test fake and each family of the registry
(``priority_kafka.families``) against the session's real broker.

A :class:`Kit` opens a client with records in a fresh topic, makes the group revoke its
partitions, and hands out the producers a test gives the client (dead letters, transactions);
what a test then asserts is the same on every backend. A new family gets its kit from the
registry alone: its ``_family`` module's ``consumer``/``producer`` and its spelling.

The contract is synchronous (the executor's ``run()`` polls from a thread). For the aiokafka
family, the registry's ``consumer()`` and ``producer()`` build aiokafka's clients on an event
loop running on a thread of their own, and its adapter (``priority_kafka.aio._client``)
submits every call to that loop and waits for it (``asyncio.run_coroutine_threadsafe``); a
rebalance hook, which aiokafka runs on its loop whenever the group moves, waits there for the
next ``poll()``. No test here changes for it.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from priority_kafka._structs import TopicPartition
from priority_kafka.executor._clients import as_client
from priority_kafka.families import NAMES, Family
from tests.fakes import FakeConsumer, FakeTransactions
from tests.test_executor import create_topic

#: The test fake first, then every family of the registry.
BACKENDS = ("fake", *NAMES)


def _values(count: int) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs a partition of ``count`` records holds, offset = index."""
    return [(f"k{offset}".encode(), f"v{offset}".encode()) for offset in range(count)]


class Kit:
    """One backend: ``open`` a client over a fresh topic holding ``counts[p]`` records in
    partition ``p``; ``revoke`` makes the next polls revoke what the client holds."""

    name: str

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.opened: list[Any] = []
        self.topic = ""
        self.tps: list[TopicPartition] = []

    def open(self, counts: list[int]) -> Any:
        raise NotImplementedError

    def revoke(self, client: Any, listener: Any) -> None:
        raise NotImplementedError

    def producer(self) -> Any:
        """A plain producer of this backend's kind (given as a dead-letter producer)."""
        raise NotImplementedError

    def transactional_producer(self, client: Any) -> Any:
        raise NotImplementedError

    def transaction_outputs(
        self, topic: str, count: int
    ) -> list[tuple[bytes | None, bytes | None]]:
        """The first ``count`` (key, value) records of ``topic`` that were committed."""
        return read_committed(self.bootstrap_servers, topic, count)

    def close(self) -> None:
        for one in reversed(self.opened):
            one.close()


class FakeKit(Kit):
    """tests.fakes.FakeConsumer: every partition assigned at once, records in memory; its dead
    letters go the kafka-python way, to the broker."""

    name = "fake"

    def open(self, counts: list[int]) -> Any:
        self.topic = f"contract-{uuid.uuid4().hex[:10]}"
        self.tps = [TopicPartition(self.topic, p) for p in range(len(counts))]
        client = FakeConsumer(
            {tp: _values(count) for tp, count in zip(self.tps, counts, strict=True)},
            max_poll_records=500, bootstrap_servers=self.bootstrap_servers,
        )
        self.opened.append(client)
        return client

    def revoke(self, client: Any, listener: Any) -> None:
        client.revoke(set(self.tps))

    def producer(self) -> Any:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers)
        self.opened.append(producer)
        return producer

    def transactional_producer(self, client: Any) -> Any:
        self._transactions = FakeTransactions(client)
        return self._transactions

    def transaction_outputs(
        self, topic: str, count: int
    ) -> list[tuple[bytes | None, bytes | None]]:
        kept = [(out.key, out.value) for out in self._transactions.outputs() if out.topic == topic]
        return kept[:count]


class FamilyKit(Kit):
    """One client family of the registry: its library's own consumer, through ``as_client``,
    in a fresh group, against the broker."""

    def __init__(self, bootstrap_servers: str, one: Family) -> None:
        super().__init__(bootstrap_servers)
        self.family = one
        self.name = one.name
        self.module = one.load()

    def _settings(self, **dotted: Any) -> dict[str, Any]:
        return self.family.spell({
            "bootstrap.servers": self.bootstrap_servers,
            **{name.replace("_", "."): value for name, value in dotted.items()},
        })

    def open(self, counts: list[int]) -> Any:
        self.topic = f"contract-{uuid.uuid4().hex[:10]}"
        self.tps = [TopicPartition(self.topic, p) for p in range(len(counts))]
        create_topic(self.bootstrap_servers, self.topic, len(counts))
        create_topic(self.bootstrap_servers, f"{self.topic}-other", 1)
        producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers)
        try:
            for tp, count in zip(self.tps, counts, strict=True):
                for key, value in _values(count):
                    producer.send(tp.topic, value=value, key=key, partition=tp.partition)
            producer.flush(30)
        finally:
            producer.close()
        consumer = self.module.consumer(self._settings(
            group_id=f"{self.topic}-group", auto_offset_reset="earliest",
            enable_auto_commit=False,
        ))
        client = as_client(consumer)
        self.opened.append(client)
        return client

    def revoke(self, client: Any, listener: Any) -> None:
        # Another subscription: the group revokes every partition of the first at the next
        # poll, on the polling thread, as a rebalance does.
        client.subscribe([f"{self.topic}-other"], listener=listener)

    def producer(self) -> Any:
        producer = self.module.producer(self._settings())
        self.opened.append(producer)
        return producer

    def transactional_producer(self, client: Any) -> Any:
        return self.module.producer(self._settings(transactional_id=f"{self.topic}-tx"))


def read_committed(
    bootstrap_servers: str, topic: str, count: int, timeout_ms: int = 30_000
) -> list[tuple[bytes | None, bytes | None]]:
    """The first ``count`` committed records of ``topic`` (read by a neutral kafka-python
    consumer, read_committed), or fewer if they do not come within ``timeout_ms``."""
    reader = KafkaConsumer(
        topic, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest",
        isolation_level="read_committed", consumer_timeout_ms=timeout_ms,
        enable_auto_commit=False,
    )
    try:
        found = []
        for record in reader:
            found.append((record.key, record.value))
            if len(found) == count:
                break
        return found
    finally:
        reader.close()
