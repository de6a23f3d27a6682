"""The confluent family's record: a librdkafka message as the executor (and a ShareExecutor's
handler) sees it, in kafka-python ``ConsumerRecord``'s names."""

from __future__ import annotations

from typing import Any

__all__ = ["Record"]


class Record:
    """One consumed message, with kafka-python ``ConsumerRecord``'s field names (the sizes of
    the key and value: -1 for None, as there)."""

    __slots__ = (
        "headers", "key", "offset", "partition", "serialized_key_size", "serialized_value_size",
        "timestamp", "topic", "value",
    )

    def __init__(self, message: Any) -> None:
        self.topic: str = message.topic()
        self.partition: int = message.partition()
        self.offset: int = message.offset()
        self.key: bytes | None = message.key()
        self.value: bytes | None = message.value()
        self.headers: list[tuple[str, bytes]] = message.headers() or []
        self.timestamp: int = message.timestamp()[1]  # ms since the epoch; -1 if unknown
        self.serialized_key_size = -1 if self.key is None else len(self.key)
        self.serialized_value_size = -1 if self.value is None else len(self.value)

    def __repr__(self) -> str:
        return f"Record({self.topic!r}, {self.partition}, {self.offset})"
