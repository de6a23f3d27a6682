"""FastPartitionRecords decodes fetched record batches exactly as kafka-python does: random
batches (nulls, empty and long keys and values, headers, compression, LogAppendTime,
transactions with control batches and aborted transactions under read_committed), taken in
random slices from random fetch offsets, record by record and position by position."""

from __future__ import annotations

import struct
from collections import namedtuple
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from priority_kafka.kafka_python import _records as _kafka_records
from priority_kafka.kafka_python._records import FastPartitionRecords

TP = TopicPartition("topic", 3)
Aborted = namedtuple("Aborted", "producer_id first_offset")
# Batch header: base offset (8), length (4), leader epoch (4), magic (1), CRC (4), then the
# attributes (2) from which the CRC is computed.
_CRC_AT, _ATTRIBUTES_AT = 17, 21
_LOG_APPEND_TIME, _CONTROL = 0x08, 0x20

records_ = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=300),
        # Long values (3-byte lengths) cost the generator little as repeated bytes.
        st.none() | st.binary(max_size=300) | st.integers(8200, 20000).map(lambda n: b"v" * n),
        st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=40)),
                 max_size=3),
        st.integers(0, 2**40),
    ),
    min_size=1, max_size=20,
)
batch_ = st.fixed_dictionaries({
    "records": records_,
    "compression": st.sampled_from([0, 1, 2, 3, 4]),  # none, gzip, snappy, lz4, zstd
    "producer_id": st.sampled_from([-1, 7, 8]),
    "log_append_time": st.booleans(),
    "control": st.sampled_from([None, "abort", "commit"]),
})


def build(batch: dict[str, Any], base_offset: int, leader_epoch: int) -> bytes:
    """One batch as a broker stores it (the attributes only a broker sets patched in, CRC
    recomputed)."""
    producer = batch["producer_id"]
    control = batch["control"] is not None and producer != -1
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0 if control else batch["compression"],
        is_transactional=producer != -1, producer_id=producer,
        producer_epoch=0 if producer != -1 else -1, base_sequence=0 if producer != -1 else -1,
        batch_size=10**8,
    )
    if control:  # a transaction marker: key (version, type 0 abort / 1 commit), value
        marker = 0 if batch["control"] == "abort" else 1
        builder.append(0, timestamp=1_700_000_000_000, key=struct.pack(">hh", 0, marker),
                       value=struct.pack(">hi", 0, 5), headers=[])
    else:
        for i, (key, value, headers, delta) in enumerate(batch["records"]):
            builder.append(i, timestamp=1_700_000_000_000 + delta, key=key, value=value,
                           headers=[(k, v) for k, v in headers])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)
    attributes = struct.unpack_from(">h", data, _ATTRIBUTES_AT)[0]
    if batch["log_append_time"]:
        attributes |= _LOG_APPEND_TIME
    if control:
        attributes |= _CONTROL
    struct.pack_into(">h", data, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">I", data, _CRC_AT, calc_crc32c(bytes(data[_ATTRIBUTES_AT:])))
    return bytes(data)


def fetched(batches: list[dict[str, Any]]) -> tuple[bytes, int]:
    data, offset = b"", 0
    for number, batch in enumerate(batches):
        data += build(batch, offset, leader_epoch=number)
        offset += 1 if batch["control"] and batch["producer_id"] != -1 else len(batch["records"])
    return data, offset


def taken(cls: type, data: bytes, fetch_offset: int, slices: list[int], **options: Any) -> Any:
    """Every take() of ``slices`` sizes (then the rest) and the position after each."""
    part = cls(fetch_offset, TP, MemoryRecords(data), **options)
    out = []
    for size in [*slices, None]:
        if not part:  # drained: the fetcher takes no more (take() would fail)
            break
        try:
            records = part.take(size)
        except CorruptRecordError as exc:
            out.append(("corrupt", str(exc)))
            break
        out.append((records, part.next_fetch_offset, bool(part)))
    return out, part.records_read, part.bytes_read, part.leader_epoch


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(batch_, min_size=1, max_size=4),
    skip=st.integers(0, 50),
    slices=st.lists(st.integers(1, 30), max_size=4),
    read_committed=st.booleans(),
    aborted=st.lists(st.tuples(st.sampled_from([7, 8]), st.integers(0, 30)), max_size=2),
    chunk=st.sampled_from([1, 3, _kafka_records.CHUNK]),
)
def test_the_same_records_and_positions_as_kafka_python(
    batches: list[dict[str, Any]], skip: int, slices: list[int], read_committed: bool,
    aborted: list[tuple[int, int]], chunk: int,
) -> None:
    data, end = fetched(batches)
    options = {
        "isolation_level": (IsolationLevel.READ_COMMITTED if read_committed
                            else IsolationLevel.READ_UNCOMMITTED),
        "aborted_transactions": [Aborted(*txn) for txn in aborted],
    }
    fetch_offset = min(skip, end)
    with mock.patch.object(_kafka_records, "CHUNK", chunk):  # batches cut into chunks too
        ours = taken(FastPartitionRecords, data, fetch_offset, slices, **options)
    theirs = taken(Fetcher.PartitionRecords, data, fetch_offset, slices, **options)
    assert ours == theirs


@pytest.mark.parametrize("cut", [1, 7, 40])
def test_a_truncated_or_damaged_batch_is_refused_as_kafka_python_refuses_it(cut: int) -> None:
    batch = {"records": [(b"k", b"v" * 100, [("h", b"x")], 5)] * 5, "compression": 0,
             "producer_id": -1, "log_append_time": False, "control": None}
    data = bytearray(build(batch, 0, 0))
    data[-cut] ^= 0xFF  # a flipped byte: the batch's CRC no longer matches
    for cls in (FastPartitionRecords, Fetcher.PartitionRecords):
        with pytest.raises(CorruptRecordError, match="crc"):
            cls(0, TP, MemoryRecords(bytes(data))).take()
    # Without CRC checks: read the same, or both refuse the record structure (kafka-python
    # after the records before the damage, ours before the batch's first).
    ours, theirs = (taken(cls, bytes(data), 0, [], check_crcs=False)[0]
                    for cls in (FastPartitionRecords, Fetcher.PartitionRecords))
    assert ours == theirs or (ours[-1][0] == "corrupt" and theirs[-1][0] == "corrupt")


def test_a_consumer_with_deserializers_keeps_kafka_pythons_decoding() -> None:
    """Deserializers run inside kafka-python's own loop: such a consumer is left alone."""
    from kafka import KafkaConsumer
    from kafka.serializer import Deserializer

    from priority_kafka.kafka_python._records import use_fast_records

    class Text(Deserializer):  # type: ignore[misc]
        def deserialize(self, topic: str, data: bytes) -> str:
            return data.decode()

    plain = KafkaConsumer(bootstrap_servers="127.0.0.1:9", api_version=(3, 0))
    decoding = KafkaConsumer(bootstrap_servers="127.0.0.1:9", api_version=(3, 0),
                             value_deserializer=Text())
    try:
        use_fast_records(plain)
        use_fast_records(decoding)
        assert plain._fetcher.PartitionRecords is FastPartitionRecords
        assert decoding._fetcher.PartitionRecords is Fetcher.PartitionRecords
    finally:
        plain.close()
        decoding.close()
