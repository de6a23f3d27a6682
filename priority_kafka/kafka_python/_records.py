"""Faster decoding of the records kafka-python fetched, for the consumers of our levels.

kafka-python 3.0.12 decodes a fetched record in about 5.3 µs of pure Python (a DefaultRecord
built field by field through property calls and varint calls, then copied into a
ConsumerRecord): most of a level consumer's ``poll()``, and the ceiling of a ShardedExecutor
over kafka-python. :class:`FastPartitionRecords` decodes the records of a v2 batch straight
from the batch's bytes into the same ``ConsumerRecord``, :data:`CHUNK` at a time (about
2.6 µs a record), and leaves the rest of kafka-python's logic as it is: CRC checks (per batch),
aborted transactions and control batches under ``read_committed``, decompression, the fetch
position after a partial take; batches of the old message formats are read through
kafka-python's record objects. It is installed on the fetcher of a consumer whose records are
not deserialized by kafka-python (our levels': the PriorityConsumer deserializes itself); any
other consumer keeps kafka-python's own code.

Proof of equality: tests/test_kafka_records.py (random batches, headers, nulls, compression,
transactions, compared record by record with kafka-python's decoding).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.util import decode_varint

__all__ = ["CHUNK", "FastPartitionRecords", "decode_batch", "use_fast_records"]

_new_record = tuple.__new__
_LOG_APPEND_TIME = 1
#: Records decoded at a time: enough to make the per-chunk work negligible, few enough that a
#: partly taken fetch holds little decoded.
CHUNK = 128


def use_fast_records(consumer: Any) -> None:
    """Decode ``consumer``'s fetched records with :class:`FastPartitionRecords` (a consumer with
    its own deserializers keeps kafka-python's decoding)."""
    fetcher = consumer._fetcher
    if fetcher.config["key_deserializer"] is None and fetcher.config["value_deserializer"] is None:
        fetcher.PartitionRecords = FastPartitionRecords


class FastPartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's PartitionRecords with each v2 batch decoded by :func:`decode_batch`."""

    def _unpack_records(
        self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
    ) -> Iterator[Any]:
        if key_deserializer is not None or value_deserializer is not None:
            yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
            return
        read_committed = self.isolation_level == IsolationLevel.READ_COMMITTED
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(
                    f"Record batch for partition {self.topic_partition} at offset "
                    f"{batch.base_offset} failed crc check")
            if batch.magic != 2:
                yield from self._old_format(tp, batch)
                batch = records.next_batch()
                continue
            # As kafka-python: aborted transactions and control batches (read_committed).
            self.leader_epoch = batch.leader_epoch
            if read_committed and batch.has_producer_id():
                self._consume_aborted_transactions_up_to(batch.last_offset)
                if self._contains_abort_marker(batch):
                    self.aborted_producer_ids.discard(batch.producer_id)
                elif self._is_batch_aborted(batch):
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
            if batch.is_control_batch:
                self.next_fetch_offset = batch.next_offset
                batch = records.next_batch()
                continue
            for decoded, size in decode_batch(batch, tp.topic, tp.partition, self.leader_epoch):
                # Metrics per chunk (kafka-python counts per record: the same once drained).
                self.records_read += len(decoded)
                self.bytes_read += size
                for record in decoded:
                    # Set before each yield: a partial take() leaves the position after it.
                    self.next_fetch_offset = record[3] + 1
                    yield record
            batch = records.next_batch()
        # Message format v2 keeps a batch's last offset when compaction removed its last
        # record: the next fetch starts after the batch (as kafka-python).
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()

    def _old_format(self, tp: Any, batch: Any) -> Iterator[Any]:
        # Message formats v0/v1 (brokers before Kafka 4 may still hold them): as kafka-python.
        for record in batch:
            if self.check_crcs and not record.validate_crc():
                raise CorruptRecordError(
                    f"Record for partition {self.topic_partition} at offset {record.offset} "
                    "failed crc check")
            key, value = record.key, record.value
            self.records_read += 1
            self.bytes_read += record.size_in_bytes
            self.next_fetch_offset = record.offset + 1
            yield _new_record(ConsumerRecord, (
                tp.topic, tp.partition, self.leader_epoch, record.offset, record.timestamp,
                record.timestamp_type, key, value, record.headers, record.checksum,
                -1 if key is None else len(key), -1 if value is None else len(value), -1,
            ))


def decode_batch(
    batch: Any, topic: str, partition: int, leader_epoch: int
) -> Iterator[tuple[list[Any], int]]:
    """The ``ConsumerRecord``s of a v2 record batch (decompressed first), :data:`CHUNK` at a
    time, each chunk with its size in bytes as kafka-python counts it; CorruptRecordError for
    a malformed batch.

    In chunks, not the whole batch at once: a batch can hold a megabyte of records, and what a
    fetch holds decoded waits in memory until it is taken (decoding whole batches raised the
    executor's peak RSS over a backlog from 113-116 to 159 MB)."""
    batch._maybe_uncompress()
    buf = batch._buffer
    pos = batch._pos
    left = batch._num_records
    fields = (topic, partition, leader_epoch, batch.base_offset, batch.first_timestamp,
              batch.timestamp_type,
              batch.max_timestamp if batch.timestamp_type == _LOG_APPEND_TIME else None)
    while left:
        try:
            records, pos, size = _decode(buf, pos, min(left, CHUNK), *fields)
        except (ValueError, IndexError) as err:
            raise CorruptRecordError(f"Found invalid record structure: {err!r}") from err
        left -= len(records)
        yield records, size
    if pos != len(buf):
        raise CorruptRecordError(f"{len(buf) - pos} unconsumed bytes after all records consumed")


def _decode(
    buf: Any, pos: int, count: int, topic: str, partition: int, leader_epoch: int,
    base_offset: int, first_timestamp: int, timestamp_type: int, append_time: int | None,
) -> tuple[list[Any], int, int]:
    # Record => Length Attributes TimestampDelta OffsetDelta Key Value Headers, all lengths
    # and deltas zigzag varints: one byte each for most, decoded inline because calls
    # dominate; longer ones by kafka-python's decode_varint.
    records: list[Any] = []
    append = records.append
    size = 0
    for _ in range(count):
        v = buf[pos]
        if v < 0x80:
            length = (v >> 1) ^ -(v & 1)
            pos += 1
        else:
            length, pos = decode_varint(buf, pos)
        start = pos
        pos += 1  # attributes: unused by the v2 format so far
        v = buf[pos]
        if v < 0x80:
            delta = (v >> 1) ^ -(v & 1)
            pos += 1
        else:
            delta, pos = decode_varint(buf, pos)
        timestamp = first_timestamp + delta if append_time is None else append_time
        v = buf[pos]
        if v < 0x80:
            delta = (v >> 1) ^ -(v & 1)
            pos += 1
        else:
            delta, pos = decode_varint(buf, pos)
        offset = base_offset + delta
        v = buf[pos]
        if v < 0x80:
            key_size = (v >> 1) ^ -(v & 1)
            pos += 1
        else:
            key_size, pos = decode_varint(buf, pos)
        if key_size >= 0:
            key: bytes | None = bytes(buf[pos:pos + key_size])
            pos += key_size
        else:
            key, key_size = None, -1
        v = buf[pos]
        if v < 0x80:
            value_size = (v >> 1) ^ -(v & 1)
            pos += 1
        else:
            value_size, pos = decode_varint(buf, pos)
        if value_size >= 0:
            value: bytes | None = bytes(buf[pos:pos + value_size])
            pos += value_size
        else:
            value, value_size = None, -1
        headers: list[tuple[str, bytes | None]] = []
        header_size = -1
        if buf[pos]:  # a count of 0 is the one byte 0
            count, pos = decode_varint(buf, pos)
            headers, header_size, pos = _headers(buf, pos, count)
        else:
            pos += 1
        if pos - start != length:
            raise CorruptRecordError(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {pos - start}")
        size += length
        append(_new_record(ConsumerRecord, (
            topic, partition, leader_epoch, offset, timestamp, timestamp_type, key, value,
            headers, None, key_size, value_size, header_size,
        )))
    return records, pos, size


def _headers(buf: Any, pos: int, count: int) -> tuple[list[tuple[str, bytes | None]], int, int]:
    """``count`` headers from ``pos``: the list, their size as kafka-python counts it (UTF-8
    key bytes plus value bytes), and the position after them."""
    if count < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {count}")
    headers = []
    size = 0
    for _ in range(count):
        key_len, pos = decode_varint(buf, pos)
        if key_len < 0:
            raise CorruptRecordError(f"Invalid negative header key size {key_len}")
        key = buf[pos:pos + key_len].decode("utf-8")
        pos += key_len
        value_len, pos = decode_varint(buf, pos)
        if value_len >= 0:
            value: bytes | None = bytes(buf[pos:pos + value_len])
            pos += value_len
            size += key_len + value_len
        else:
            value = None
            size += key_len
        headers.append((key, value))
    return headers, size, pos

