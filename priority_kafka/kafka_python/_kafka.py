"""The kafka-python family's library edge: the kafka-python names its modules use, and each
work-around for one of its bugs (those of its network client in
``priority_kafka.kafka_python._net``, re-exported here).

The rest of the package talks to kafka-python through the names re-exported here (the CLI,
the metrics' lag reader, the Spark options' defaults and the test broker and cluster also
import kafka-python's admin, producer and consumer directly) and to a client consumer through
:class:`priority_kafka._types.ClientConsumer`. Each work-around sits behind a flag that says
which kafka-python versions it was verified on and which test proves the bug; when a
kafka-python release fixes one, its flag gets an upper bound and the branch it guards can be
deleted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.consumer.subscription_state import (
    AsyncConsumerRebalanceListener,
    ConsumerRebalanceListener,
)
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetMetadataTooLargeError,
)
from kafka.errors import IllegalStateError as KafkaIllegalStateError
from kafka.future import Future
from kafka.protocol.consumer import OffsetResetStrategy
from kafka.structs import MemberState, OffsetAndMetadata

from priority_kafka._rebalance import ChainedListener
from priority_kafka.added import AddedPartitions
from priority_kafka.config import CLIENT_DEFAULTS
from priority_kafka.kafka_python._net import (
    AUTH_FAILURE_NOT_CACHED,
    BOOTSTRAP_REFUSALS_RETRIED,
    KAFKA_PYTHON_VERSION,
    AuthFailFastClient,
    ClusterUnreachableError,
    TlsHandshakeError,
)

__all__ = [
    "AUTH_FAILURE_NOT_CACHED",
    "AUTO_CREATE_SETTING_IGNORED",
    "BOOTSTRAP_REFUSALS_RETRIED",
    "DESERIALIZER_ERROR_STOPS_POLL",
    "FETCH_SENT_ONLY_IN_POLL",
    "FLUSH_TIMEOUT_PER_BATCH",
    "FORGETS_PENDING_JOIN",
    "JOIN_NEEDS_BLOCKING_POLL",
    "JOIN_POLL_MS",
    "KAFKA_PYTHON_VERSION",
    "KEPT_PARTITIONS_POLL_MS",
    "NO_RECORDS_WHILE_JOINING",
    "PARKED_RECORDS_STUCK",
    "POLL_RAISES_LOST_CONNECTION",
    "POSITION_SURVIVES_REASSIGNMENT",
    "REPLACES_FINISHED_JOIN",
    "STALE_OFFSET_FETCH_REUSED",
    "AsyncConsumerRebalanceListener",
    "AuthFailFastClient",
    "ClusterUnreachableError",
    "CommitFailedError",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "Future",
    "KafkaConsumer",
    "KafkaIllegalStateError",
    "KafkaProducer",
    "OffsetAndMetadata",
    "OffsetMetadataTooLargeError",
    "TlsHandshakeError",
    "TopicPartition",
    "all_of",
    "chase_fetch",
    "cluster_topics",
    "fetch_kept_partitions",
    "flush_within",
    "force_rejoin",
    "forget_earlier_offset_fetches",
    "group_progress",
    "honour_auto_create_setting",
    "kafka_offsets",
    "kafka_partitions",
    "keep_pending_join",
    "keeping_pending_join",
    "keeps_partitions_while_joining",
    "listed_topics",
    "poll_through_lost_connections",
    "read_added_from_start",
    "release_parked_records",
    "with_client_defaults",
]


# kafka-python's subscribe() takes only instances of its listener classes; the chain is one in
# all but its base, which would make every module that chains import kafka-python.
AsyncConsumerRebalanceListener.register(ChainedListener)

#: Records fetched for a partition while it was paused are parked (KAFKA-7548) and, after
#: ``resume()``, restored only when the fetcher's in-line slot is None; a drained slot is falsy
#: but not None, so a resumed partition can starve. Verified on 3.0.0-3.0.12;
#: proof: tests/test_kafka_edge.py::test_every_resumed_partition_is_consumed_to_the_end.
PARKED_RECORDS_STUCK = KAFKA_PYTHON_VERSION >= (3, 0)

#: A group (re)join runs on kafka-python's IO thread but is applied only inside a ``poll()``
#: (and each poll's coordinator step waits for it), and a join task that finished between two
#: polls used to be replaced by a new JoinGroup (REPLACES_FINISHED_JOIN, now worked around):
#: zero-timeout polls (lower levels, full buffers) joined only by luck. A level whose group is
#: not settled is therefore polled with JOIN_POLL_MS. Verified on 3.0.12; proof:
#: tests/test_consumer_unit.py::test_a_joining_level_gets_time_to_finish_its_join and the
#: group tests of tests/test_consumer.py and tests/test_executor.py.
JOIN_NEEDS_BLOCKING_POLL = KAFKA_PYTHON_VERSION >= (3, 0)

#: After a deserializer raised inside ``poll()``, later polls hang and return nothing more:
#: priority_kafka deserializes itself. Verified on 3.0.12; proof:
#: tests/test_kafka_edge.py::test_deserializer_error_stops_poll_matches_kafka_python.
DESERIALIZER_ERROR_STOPS_POLL = KAFKA_PYTHON_VERSION >= (3, 0)

#: A partition revoked and assigned again (eager rebalance) keeps its old position and pause
#: state, so records dropped from a prefetch or work queue must be sought back to. Verified on
#: 3.0.12; proof: tests/test_consumer.py::
#: test_a_member_joining_later_continues_where_the_first_left_off.
POSITION_SURVIVES_REASSIGNMENT = KAFKA_PYTHON_VERSION >= (3, 0)

#: kafka-python's join loop runs ``while need_rejoin()``, where Java's runs while a rejoin is
#: needed *or pending*. A rejoin that a metadata change starts (partitions added, a topic
#: matching a pattern, or a topic created just before the subscribe whose metadata came after
#: the group's first join, which then assigned nothing) raises no flag: ``need_rejoin()`` is
#: True only because the leader's assignment snapshot differs from the metadata, and the
#: leader's own assignment, running in the join task, makes them equal. A ``poll()`` that
#: returned before that task finished never awaits it again: the member sits REBALANCING
#: with its old partitions forever, silently.
#: A poll(0) loop hits it nearly every time, longer polls when the exchange outlasts them.
#: Verified on 3.0.12; reproduction: benchmarks/kafka_python_join_stall.py; proof:
#: tests/test_kafka_edge.py::test_zero_timeout_polls_forget_a_pending_join.
FORGETS_PENDING_JOIN = KAFKA_PYTHON_VERSION >= (3, 0)

#: A join task that finished while no ``poll()`` awaited it is replaced, at the next poll, by
#: a new JoinGroup (``join_group_async`` starts one when the task ``is_done``, also when it
#: succeeded): the assignment it received is never applied and the whole group rebalances
#: again. Under churn that is a join storm that keeps a level without records for longer than
#: a session timeout. Verified on 3.0.12; reproduction:
#: ``benchmarks/kafka_python_join_stall.py --case finished``; proof:
#: tests/test_kafka_edge.py::test_a_join_finished_between_polls_is_applied.
REPLACES_FINISHED_JOIN = KAFKA_PYTHON_VERSION >= (3, 0)

#: ``poll()`` returns nothing while the consumer's group joins (its coordinator poll comes
#: before the fetch and blocks for the join), also for the partitions a member keeps through a
#: cooperative rebalance, which KIP-429 lets it go on consuming: a member stopped for 1-2.6 s
#: whenever another joined. Between polls, priority_kafka fetches the kept partitions itself
#: (``fetch_kept_partitions``). Verified on 3.0.12; proof:
#: tests/test_rebalancing.py::
#: test_cooperative_join_revokes_only_moved_partitions_and_kept_ones_keep_flowing.
NO_RECORDS_WHILE_JOINING = KAFKA_PYTHON_VERSION >= (3, 0)

#: A consumer sends a fetch only when a ``poll()`` starts and finds nothing buffered, and a poll
#: that waited for a fetch's answer returns its records without sending the next: between two
#: polls there is often no fetch in flight (and a fetch answered early in the gap, when records
#: were waiting, leaves none either). A record produced then reaches the client only with the
#: fetch the next poll sends, after that poll has looked: it comes with the poll after, a whole
#: batch of the application's handling later (level-2 p50 82 ms instead of ~30 ms at 500
#: records handled in 50 ms per poll, benchmarks/priority_latency.py). A PriorityConsumer
#: level chases the fetch its poll just sent (``chase_fetch``). Verified on 3.0.12; proof:
#: tests/test_consumer.py::test_a_record_produced_after_a_fetch_answer_comes_with_the_next_poll.
FETCH_SENT_ONLY_IN_POLL = KAFKA_PYTHON_VERSION >= (3, 0)

#: The longest poll a level that keeps partitions through a cooperative join makes (see
#: NO_RECORDS_WHILE_JOINING): the join runs on kafka-python's IO thread and is applied by the
#: next poll, so a blocking join poll would only keep the kept partitions' records waiting.
KEPT_PARTITIONS_POLL_MS = 20

#: A consumer's ``allow_auto_create_topics=False`` never reaches its metadata requests: the
#: cluster metadata object is built without it and asks the broker to create every missing
#: topic it looks up. Verified on 3.0.12; proof:
#: tests/spark/test_spark_client.py::test_reading_a_missing_topic_never_creates_it and
#: tests/test_consumer.py::test_subscribing_to_a_missing_level_never_creates_it.
AUTO_CREATE_SETTING_IGNORED = KAFKA_PYTHON_VERSION >= (3, 0)

#: How long a ``poll()`` waits while its group (re)joins (see JOIN_NEEDS_BLOCKING_POLL); it
#: returns early only with records, so each empty joining level costs this much. A join that
#: outlasts it is kept for the next poll (REPLACES_FINISHED_JOIN). 300 ms: at 500 ms the first
#: records of a consumer with two empty levels came 0.4 s later (benchmarks/burst.py); with
#: 50 ms polls tests/test_consumer.py lost a level's records in 3 of 4 runs (cause not found).
JOIN_POLL_MS = 300 if JOIN_NEEDS_BLOCKING_POLL else 0

#: ``poll()`` raises KafkaConnectionError ("socket disconnected") when a broker's connection is
#: lost while the consumer waits for a metadata refresh to find its group coordinator
#: (``ensure_coordinator_ready_async`` awaits the refresh's future, which fails with it), where
#: Java's consumer retries. In the chaos soak a kafka-python member died of it, and its
#: replacement could not start, while one node of three was down. A failed TLS handshake or an
#: unreachable cluster is raised as TlsHandshakeError or ClusterUnreachableError, not this.
#: Verified on 3.0.12; proof: benchmarks/soak.py runs (the member's traceback) and
#: tests/test_consumer_unit.py::test_a_lost_connection_raised_by_poll_is_an_empty_poll.
POLL_RAISES_LOST_CONNECTION = KAFKA_PYTHON_VERSION >= (3, 0)

#: ``KafkaProducer.flush(timeout)`` gives each unfinished batch ``timeout`` of its own
#: (``RecordAccumulator.await_flush_completion`` waits on one batch after another), so a flush
#: of batches that finish one after another, each within the timeout (a slow or failing
#: cluster, batches retried), waits up to one timeout per batch. Verified on 3.0.12; proof:
#: tests/test_kafka_edge.py, test_flush_within_bounds_the_whole_flush_where_kafka_python_...
FLUSH_TIMEOUT_PER_BATCH = KAFKA_PYTHON_VERSION >= (2, 0)

#: A fetch of committed offsets stays in the coordinator's table by partitions until a waiter
#: sees its answer, and the next fetch of the same partitions takes that answer, however old:
#: a poll whose refresh timed out picks its answer up at the next poll (the table is how
#: zero-timeout polls make progress at all), but the next fetch may come after a rebalance.
#: In the chaos soak a refresh right after a rebalance (generation 32) got the answer of a
#: fetch sent in generation 30, 14 s before: a kafka-python exactly-once member resumed from
#: offsets since committed past and wrote 147 outputs a second time. Java reuses a
#: committed-offsets request only for the same partitions in the same generation
#: (``PendingCommittedOffsetRequest.sameRequest``); consumers this library creates or drives
#: do the same. Verified on 3.0.12; proof: tests/test_kafka_edge.py::
#: test_an_offset_fetch_of_an_earlier_generation_is_not_reused.
STALE_OFFSET_FETCH_REUSED = KAFKA_PYTHON_VERSION >= (3, 0)

log = logging.getLogger(__name__)
_LOST_CONNECTION_WARN_S = 5.0
_lost_connection_warned = [float("-inf")]  # when the last such warning was logged


def with_client_defaults(configs: Mapping[str, Any]) -> dict[str, Any]:
    """``configs`` (kafka-python names) for a KafkaConsumer or KafkaProducer of this library:
    :data:`~priority_kafka.config.CLIENT_DEFAULTS` and the work-around client for the keys not
    given."""
    client = {"kafka_client": AuthFailFastClient} if AUTH_FAILURE_NOT_CACHED else {}
    return {**CLIENT_DEFAULTS, **client, **configs}


_LIST_TOPICS_TIMEOUT_S = 60.0  # Java's default.api.timeout.ms
_LIST_TOPICS_RETRY_S = 0.5


def cluster_topics(connection: Mapping[str, Any]) -> set[str]:
    """Every topic the cluster lists, asked by a short-lived KafkaConsumer of ``connection``
    (kafka-python names) that joins no group: a metadata request for all topics creates none."""
    # No group, so no auto-commit (kafka-python warns when it has to turn it off itself).
    client = KafkaConsumer(**with_client_defaults(connection), enable_auto_commit=False)
    try:
        return listed_topics(client)
    finally:
        client.close()


def listed_topics(client: Any, timeout_s: float = _LIST_TOPICS_TIMEOUT_S) -> set[str]:
    """``client.topics()``, asked again while a broker's connection drops under it (kafka-python
    raises KafkaConnectionError where Java's clients retry until default.api.timeout.ms): the
    soak's replacement members died in subscribe() of it while a node was cut off."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return set(client.topics())
        except KafkaConnectionError:
            if time.monotonic() + _LIST_TOPICS_RETRY_S >= deadline:
                raise
            time.sleep(_LIST_TOPICS_RETRY_S)


def flush_within(producer: KafkaProducer, timeout: float | None) -> None:
    """``producer.flush(timeout)`` within ``timeout`` seconds in all (see
    FLUSH_TIMEOUT_PER_BATCH); KafkaTimeoutError when batches are still unfinished then."""
    if timeout is None or not FLUSH_TIMEOUT_PER_BATCH:
        producer.flush(timeout=timeout)
        return
    deadline = time.monotonic() + timeout
    accumulator = producer._accumulator
    accumulator.begin_flush()
    producer._sender.wakeup()
    try:
        for batch in accumulator._incomplete.all():
            if not batch.produce_future.wait(timeout=max(0.0, deadline - time.monotonic())):
                raise KafkaTimeoutError(
                    f"flush: {len(accumulator._incomplete.all())} batch(es) still unsent after "
                    f"{timeout:g} s")
    finally:
        accumulator._flushes_in_progress.decrement()


def poll_through_lost_connections(consumer: Any, **poll: Any) -> Any:
    """``consumer.poll(**poll)``, or None when kafka-python raised a lost connection out of it
    (see POLL_RAISES_LOST_CONNECTION): the next poll retries, as Java's consumer does."""
    try:
        return consumer.poll(**poll)
    except KafkaConnectionError as exc:
        if not POLL_RAISES_LOST_CONNECTION:
            raise
        now = time.monotonic()
        if now >= _lost_connection_warned[0] + _LOST_CONNECTION_WARN_S:  # not for every poll
            _lost_connection_warned[0] = now
            log.warning("poll() lost a broker connection (%s); polling on", exc)
        return None


def release_parked_records(consumer: Any) -> None:
    """Let a resumed partition's parked records be returned again (see PARKED_RECORDS_STUCK).

    Clearing the drained in-line slot (it holds no records) lets ``poll()`` restore the parked
    data. Call before every ``poll()``, on the polling thread; consumers without that internal
    state (fakes, other clients) are left alone.
    """
    if not PARKED_RECORDS_STUCK:
        return
    fetcher = getattr(consumer, "_fetcher", None)
    in_line = getattr(fetcher, "_next_partition_records", None)
    if in_line is not None and not in_line:
        fetcher._next_partition_records = None  # type: ignore[union-attr]


def honour_auto_create_setting(consumer: Any) -> Any:
    """Make the consumer's metadata requests follow its ``allow_auto_create_topics`` (see
    AUTO_CREATE_SETTING_IGNORED); returns the consumer. Call right after creating it."""
    if AUTO_CREATE_SETTING_IGNORED:
        cluster = getattr(getattr(consumer, "_manager", None), "cluster", None)
        if cluster is not None:
            cluster.config["allow_auto_create_topics"] = consumer.config["allow_auto_create_topics"]
    return consumer


class _FetchesInFlight(dict):
    """The coordinator's offset fetches by partitions, holding a fetch (answered or not) only
    in the group generation it was sent in (see STALE_OFFSET_FETCH_REUSED)."""

    def __init__(self, coordinator: Any) -> None:
        super().__init__()
        self._coordinator = coordinator
        self._sent_in: dict[Any, Any] = {}

    def __setitem__(self, key: Any, future: Any) -> None:
        self._sent_in[key] = self._coordinator._generation
        super().__setitem__(key, future)

    def __delitem__(self, key: Any) -> None:
        self._sent_in.pop(key, None)
        super().__delitem__(key)

    def __contains__(self, key: object) -> bool:
        if not super().__contains__(key):
            return False
        if self._sent_in.get(key) != self._coordinator._generation:
            del self[key]  # its waiters hold the future itself
            return False
        return True


def forget_earlier_offset_fetches(consumer: Any) -> Any:
    """Make the consumer's group coordinator reuse an offset fetch only in the generation it
    was sent in (see STALE_OFFSET_FETCH_REUSED); returns the consumer.
    Call right after creating it (or taking it over); a consumer without a group is left as
    it is."""
    coordinator = _coordinator(consumer)
    fetches = getattr(coordinator, "_offset_fetch_futures", None)
    if STALE_OFFSET_FETCH_REUSED and isinstance(fetches, dict) and not isinstance(
            fetches, _FetchesInFlight):
        coordinator._offset_fetch_futures = _FetchesInFlight(coordinator)
    return consumer


def _coordinator(consumer: Any) -> Any:
    """kafka-python's group coordinator of a subscribed consumer; None for other clients."""
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None or getattr(coordinator, "group_id", None) is None:
        return None
    return coordinator


class _FinishedJoin(Future):
    """A join task's successful result, handed to the next poll as a task not yet done (see
    REPLACES_FINISHED_JOIN): it completes as soon as that poll awaits it."""

    __slots__ = ("_assignment",)

    def __init__(self, assignment: Any) -> None:
        super().__init__()
        self._assignment = assignment

    def add_callback(self, f: Any, *args: Any, **kwargs: Any) -> Future:
        super().add_callback(f, *args, **kwargs)
        if not self.is_done:
            self.success(self._assignment)
        return self


def _keep_finished_join(coordinator: Any, task: Future) -> None:
    """Once ``task`` succeeds, leave its result for the next poll unless a poll took it."""

    def finished(assignment: Any) -> None:
        # A poll awaiting the task resets _join_task itself after this runs; only a task that
        # nobody awaits is still in place here and would be replaced.
        if coordinator._join_task is task:
            coordinator._join_task = _FinishedJoin(assignment)

    task.add_callback(finished)


def keep_pending_join(consumer: Any) -> bool:
    """Keep a rejoin whose join task is still pending or finished unawaited, so the next
    ``poll()`` completes it (see FORGETS_PENDING_JOIN and REPLACES_FINISHED_JOIN). Call after
    every ``poll()``, on the polling thread; True when it flagged a forgotten rejoin.
    """
    coordinator = _coordinator(consumer)
    task = None if coordinator is None else getattr(coordinator, "_join_task", None)
    if task is None:
        return False
    if (
        REPLACES_FINISHED_JOIN
        and isinstance(task, Future)
        and not isinstance(task, _FinishedJoin)
        and getattr(coordinator, "_watched_join", None) is not task
    ):
        coordinator._watched_join = task
        _keep_finished_join(coordinator, task)
    if not FORGETS_PENDING_JOIN or coordinator.rejoin_needed:
        return False
    coordinator.request_rejoin()
    return True


def keeping_pending_join(consumer: Any) -> Any:
    """``consumer`` (a subscribed ``KafkaConsumer`` of the caller's) with every ``poll()``
    followed by :func:`keep_pending_join`, as a PriorityConsumer level polls; returns it.

    For plain consumers that poll in a loop (benchmark baselines, test readers): without it a
    fresh group's member could sit with no partitions for ever (FORGETS_PENDING_JOIN)."""
    poll = consumer.poll

    def poll_keeping_join(*args: Any, **kwargs: Any) -> Any:
        records = poll(*args, **kwargs)
        keep_pending_join(consumer)
        return records

    consumer.poll = poll_keeping_join
    return consumer


def keeps_partitions_while_joining(consumer: Any) -> bool:
    """Whether a consumer is in a cooperative rebalance and keeps partitions through it (see
    NO_RECORDS_WHILE_JOINING); False for other clients and eager protocols."""
    coordinator = _coordinator(consumer) if NO_RECORDS_WHILE_JOINING else None
    if coordinator is None:
        return False
    if getattr(coordinator, "_rebalance_protocol", None) is not RebalanceProtocol.COOPERATIVE:
        return False
    joining = (
        coordinator.rejoin_needed
        or coordinator._join_task is not None
        or coordinator.state is not MemberState.STABLE
    )
    return joining and bool(consumer.assignment())


def fetch_kept_partitions(consumer: Any, max_records: int) -> dict[TopicPartition, list]:
    """Records of the partitions a consumer keeps through a cooperative rebalance, without
    waiting; ``{}`` when it is not in one (see NO_RECORDS_WHILE_JOINING). Call on the polling
    thread after a ``poll()`` that returned nothing: partitions being revoked are not
    fetchable, and positions advance as ``poll()`` advances them."""
    if not keeps_partitions_while_joining(consumer):
        return {}
    records, _idle = consumer._fetcher.fetch_records(
        max_records, update_offsets=True, timeout_ms=0
    )
    return records


def chase_fetch(consumer: Any, max_records: int, wait_ms: float) -> dict[TopicPartition, list]:
    """Up to ``max_records`` records of the fetch a ``poll()`` just sent, waiting for its answer
    at most ``wait_ms``, and the next fetch sent, so that one is in flight until the next
    ``poll()`` (see FETCH_SENT_ONLY_IN_POLL); ``{}`` for consumers without that fetcher. Call
    on the polling thread right after a ``poll()`` that returned records."""
    fetcher = getattr(consumer, "_fetcher", None) if FETCH_SENT_ONLY_IN_POLL else None
    if fetcher is None:
        return {}
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        remaining_ms = max(0.0, (deadline - time.monotonic()) * 1000)
        records, _idle = fetcher.fetch_records(max_records, update_offsets=True,
                                               timeout_ms=remaining_ms)
        if not getattr(fetcher, "_nodes_with_pending_fetch_requests", True):
            # Answered during the wait: draining the answer sent nothing, so send the next
            # fetch. An answer without records (seen: about 1 in 30 under a steady trickle)
            # is chased again while time is left.
            fetcher.send_fetches()
        if records or time.monotonic() >= deadline:
            return records


def group_progress(consumer: Any) -> tuple[bool, tuple[Any, ...]] | None:
    """``(settled, progress)`` of a consumer's group membership, None outside a group.

    ``settled`` is a stable member; ``progress`` (state, generation, member id, from the public
    ``group_metadata()``) changes whenever the membership moves on.
    """
    snapshot = getattr(consumer, "group_metadata", None)
    if snapshot is None or not consumer.subscription():
        return None
    meta = snapshot()
    if meta.group_id is None:
        return None
    return meta.state == MemberState.STABLE, (meta.state, meta.generation_id, meta.member_id)


def force_rejoin(consumer: Any) -> None:
    """Start the consumer's group join afresh on its next ``poll()``.

    For a join that stopped progressing: the pending join task (if any) is abandoned, so the
    next poll sends a new JoinGroup with the same member id.
    """
    coordinator = _coordinator(consumer)
    if coordinator is None:
        return
    coordinator._join_task = None
    coordinator.request_rejoin()


def all_of(futures: Sequence[Future], value: Any = None) -> Future:
    """A Future that succeeds with ``value`` once every one of ``futures`` has succeeded.

    It fails with the first failure once all have answered. Callbacks run on whichever thread
    completes the last future (kafka-python's IO threads), so the result may be awaited in an
    ``AsyncConsumerRebalanceListener``.
    """
    combined = Future()
    if not futures:
        return combined.success(value)
    lock = threading.Lock()
    answers: list[Any] = []

    def answered(result: Any) -> None:
        with lock:
            answers.append(result)
            if len(answers) < len(futures):
                return
        error = next((a for a in answers if isinstance(a, BaseException)), None)
        if error is not None:
            combined.failure(error)
        else:
            combined.success(value)

    for future in futures:
        future.add_both(answered)
    return combined


#: How long an assignment waits for the committed offsets of added partitions.
_ADDED_COMMITS_TIMEOUT_MS = 10_000


async def read_added_from_start(
    consumer: Any, added: AddedPartitions, partitions: set[TopicPartition]
) -> list[TopicPartition]:
    """Have the partitions of ``partitions`` added since the first assignment, and without a
    committed offset, read from their start (see :mod:`priority_kafka.added`); returns them.

    Called from the rebalance listener on kafka-python's IO thread, before the poll resolves
    the new partitions' positions: a reset requested here wins over ``auto_offset_reset``,
    and a committed offset (found here) is left for the poll to use.
    """
    coordinator = _coordinator(consumer)
    cluster = getattr(getattr(consumer, "_manager", None), "cluster", None)
    if coordinator is None or cluster is None:
        return []

    def counts() -> dict[str, int]:
        return {t: len(cluster.partitions_for_topic(t) or ()) for t in cluster.topics()}

    new = [TopicPartition(t, p)
           for t, p in added.added(((tp.topic, tp.partition) for tp in partitions), counts)]
    if not new:
        return []
    committed = await coordinator.fetch_committed_offsets_async(
        new, timeout_ms=_ADDED_COMMITS_TIMEOUT_MS)
    fresh = [tp for tp in new
             if committed.get(tp) is None or committed[tp].offset < 0]
    for tp in fresh:
        consumer._subscription.request_offset_reset(tp, OffsetResetStrategy.EARLIEST)
    return fresh


def kafka_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    """``partitions`` as kafka-python's TopicPartition: its calls check ``isinstance``, and the
    executor's core has ``priority_kafka._structs``' (equal, but another class)."""
    return [TopicPartition(*tp) for tp in partitions]


def kafka_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
    """``offsets`` keyed and valued by kafka-python's classes (see :func:`kafka_partitions`)."""
    return {TopicPartition(*tp): OffsetAndMetadata(*meta) for tp, meta in offsets.items()}
