"""The Kafka sink's EXACTLY_ONCE writer and its committer on confluent-kafka (librdkafka).

Invariant (the protocol of ``sink_transactions``): a writer fences every
transactional id it will use (``init_transactions`` aborts what an earlier attempt left open
and bumps the epoch, so a zombie can no longer commit) before it reads its marker, settles
the restored pending transactions (commits nothing twice: a transaction the marker covers is
done, any other is sent again from its records) and writes. A live transaction is committed
by the writer's own producer when its checkpoint completes, on the writer's commit thread,
in sequence order: the marker (``send_offsets_to_transaction``) and ``commit_transaction``
run there while the task thread writes the next transaction on another id of the pool. Two
producers of the pool never have records in flight at once, or a key's later records could
overtake its earlier ones: a transaction pre-committed at its barrier drains (its records
reach the broker) while the next one holds its records, kept but not sent, and sends them
once the drain is over; the task waits for a drain only at the next barrier, if it is not
over by then. The task thread learns a commit's outcome at its
next call: a failed commit (e.g. the broker aborted the transaction because
``transaction.timeout.ms`` passed) fails the job, and the restored writer sends it again
from the checkpoint's writer state, which holds every pending transaction's records until
its commit is known. (NONE / AT_LEAST_ONCE: ``sink_output``.)
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cairn.api.connectors import Committer, SinkWriter, SinkWriterContext
from cairn.datastream.connectors.kafka.sink_output import (
    KafkaSinkError,
    Output,
    call,
    check_reachable,
    producer_config,
    watched,
    words,
)
from cairn.datastream.connectors.kafka.sink_transactions import (
    KafkaCommittable,
    PendingTransaction,
    StoredRecord,
    TransactionIds,
    WriterState,
    check_pool,
    free_slot,
    marker_metadata,
    to_redo,
)
from cairn.ids import CheckpointId

if TYPE_CHECKING:
    from cairn.datastream.connectors.kafka.sink_config import KafkaSinkConfig

__all__ = ["KafkaCommitter", "TransactionalWriter"]

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT_S = 60.0  # one transactional request (commit)
_MARKER_TIMEOUT_S = 30.0  # send_offsets_to_transaction (see sink_output.watched)

# Live transactional writers of this process, by (job, attempt, marker group): the
# committer of a subtask commits through its own writer's producers.
_LIVE: dict[tuple[str, int, str], TransactionalWriter] = {}
_LIVE_LOCK = threading.Lock()


class _Slot:
    """One transactional id of a writer and its producer (None until fenced)."""

    def __init__(self, tid: str) -> None:
        self.tid = tid
        self.producer: Any = None


class TransactionalWriter(SinkWriter):
    """EXACTLY_ONCE: a transaction per checkpoint on a pool of transactional ids."""

    def __init__(
        self, sink: KafkaSinkConfig, context: SinkWriterContext, restored: Sequence[Any]
    ) -> None:
        assert sink.transactional_id_prefix is not None and sink.marker_topic is not None
        self._sink = sink
        self._context = context
        self._out = Output(sink, context)
        self._marker_topic = sink.marker_topic
        self.ids = TransactionIds(
            sink.transactional_id_prefix, context.parallelism, context.subtask_index
        )
        self._slots = [_Slot(self.ids.transactional_id(s)) for s in range(sink.pool_size)]
        self._pending: list[PendingTransaction] = []
        self._open: int | None = None  # slot of the open transaction
        self._open_records: list[StoredRecord] = []
        self._open_seq = 0
        # Slot of the last pre-committed transaction while its records are still on their
        # way to the broker: the open transaction's records are held (kept, not sent) until
        # they all arrived, so that no partition receives two producers' records at once.
        self._draining: int | None = None
        self._group_metadata: Any = None
        self._closed = False
        self._commits = _CommitThread(self._commit_one)
        states = [s for s in restored if isinstance(s, WriterState)]
        own = [s for s in states if s.ids == self.ids]
        # Fence our ids first (all at once: each is a round trip to the coordinator).
        from confluent_kafka import Producer

        # A clear error for a cluster that does not answer, before waiting on coordinators.
        check_reachable(sink, Producer(producer_config(sink, {})), self._marker_topic)
        _fence(self._sink, self._slots, self._out.on_delivery)
        self._marker, self._group_metadata = _read_marker(
            sink, self.ids.marker_group, self._marker_topic
        )
        for state in own:
            check_pool(state.pending, sink.pool_size)
            self._redo(self._slots[0].producer, state.pending)
        for state in states:
            if state.ids != self.ids:
                self._settle_foreign(state)
        with _LIVE_LOCK:
            _LIVE[(context.job_id, context.attempt_number, self.ids.marker_group)] = self

    # --- recovery ---------------------------------------------------------------------

    def _redo(self, producer: Any, pending: Sequence[PendingTransaction]) -> None:
        """Send again, in order, each of our pending transactions the marker does not cover."""
        for p in to_redo(pending, self._marker):
            self._transaction(producer, self.ids, self._marker_topic, self._group_metadata, p)
            self._marker = p.seq

    def _settle_foreign(self, state: WriterState) -> None:
        """Settle an old subtask's ids of another parallelism (no live writer owns them):
        fence all of them, then redo what its marker does not cover."""
        slots = [_Slot(state.ids.transactional_id(s)) for s in range(state.pool_size)]
        _fence(self._sink, slots, self._out.on_delivery)
        try:
            marker, metadata = _read_marker(self._sink, state.ids.marker_group, state.marker_topic)
            for p in to_redo(state.pending, marker):
                self._transaction(slots[0].producer, state.ids, state.marker_topic, metadata, p)
        finally:
            for slot in slots:
                slot.producer = None

    def _transaction(
        self,
        producer: Any,
        ids: TransactionIds,
        marker_topic: str,
        group_metadata: Any,
        p: PendingTransaction,
    ) -> None:
        """A pending transaction's records and marker again, in a new transaction."""
        producer.begin_transaction()
        for topic, partition, key, value, ts in p.records:
            self._out.produce(producer.produce, producer, topic, partition, key, value, ts)
        self._out.flush(producer, self._sink.transaction_timeout_ms / 1000, "a redo")
        self._send_marker(producer, ids, marker_topic, group_metadata, p.seq, p.checkpoint_id)
        call(producer.commit_transaction, _REQUEST_TIMEOUT_S, f"commit of {ids.marker_group}")
        log.info(
            "Kafka sink: %s: transaction %d of checkpoint %d had been aborted; sent again "
            "(%d records)",
            ids.marker_group,
            p.seq,
            p.checkpoint_id,
            len(p.records),
        )

    def _send_marker(
        self,
        producer: Any,
        ids: TransactionIds,
        marker_topic: str,
        group_metadata: Any,
        seq: int,
        cid: CheckpointId,
    ) -> None:
        from confluent_kafka import TopicPartition

        meta = marker_metadata(self._context.job_id, self._context.attempt_number, cid)
        tp = TopicPartition(marker_topic, 0, seq, meta)
        what = f"the marker of {ids.marker_group}"
        watched(
            lambda: call(
                lambda t: producer.send_offsets_to_transaction([tp], group_metadata, t),
                _MARKER_TIMEOUT_S,
                what,
            ),
            _MARKER_TIMEOUT_S + 5.0,
            what,
        )

    # --- writing ----------------------------------------------------------------------

    def _begin(self) -> int:
        self._reap()
        if self._draining is not None and all(p.slot != self._draining for p in self._pending):
            self._release(wait=False)  # committed, so delivered: its id is free again
        slot = free_slot(len(self._slots), self._busy())
        while slot is None and self._commits.wait_one(_REQUEST_TIMEOUT_S):
            self._reap()  # a commit in flight frees its id: wait for it, not fail
            slot = free_slot(len(self._slots), self._busy())
        if slot is None:
            raise KafkaSinkError(
                f"Kafka sink {self.ids.marker_group}: all {len(self._slots)} transactional ids "
                f"hold transactions of checkpoints not completed yet "
                f"({[p.checkpoint_id for p in self._pending]}); raise "
                "cairn.transactional-id.pool-size or let checkpoints complete"
            )
        self._slots[slot].producer.begin_transaction()
        self._open = slot
        self._open_seq = max([self._marker, *(p.seq for p in self._pending)]) + 1
        self._open_records = []
        return slot

    def _busy(self) -> list[int]:
        """Slots not to begin on: pending, and draining (until released, even if committed)."""
        busy = [p.slot for p in self._pending]
        return busy if self._draining is None else [*busy, self._draining]

    def write(self, record: Any) -> None:
        self.write_batch((record,))

    def write_batch(self, records: Sequence[Any]) -> None:
        if self._commits.news:
            self._reap()
        slot = self._open if self._open is not None else self._begin()
        producer = self._slots[slot].producer
        if self._draining is not None and not self._release(wait=False):
            self._out.hold(producer, records, self._open_records)
            return
        self._out.send(producer, records, self._open_records)

    def _release(self, wait: bool) -> bool:
        """Once every record of the draining (pre-committed) transaction reached the broker,
        send the open transaction's held records and stop holding; ``wait``: block until
        then (failing after ``transaction.timeout.ms``). True when released."""
        assert self._draining is not None
        draining = self._slots[self._draining].producer
        if wait:
            timeout_s = self._sink.transaction_timeout_ms / 1000
            self._out.flush(draining, timeout_s, "pre-commit")
        else:
            draining.poll(0)  # serves failed deliveries' reports
            self._out.check()
            if len(draining) > 0:  # messages queued or awaiting the broker's ack
                return False
        self._draining = None
        if self._open is not None and self._open_records:
            self._out.resend(self._slots[self._open].producer, self._open_records)
        return True

    def flush(self, end_of_input: bool) -> None:
        self._reap()
        if self._draining is not None:
            self._release(wait=False)
        if self._open is not None:
            self._slots[self._open].producer.poll(0)
            self._out.check()

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[KafkaCommittable]:
        """Pre-commit at the barrier: the transaction becomes pending, its records kept in
        the writer state, and starts draining: the next transaction, on another producer of
        the pool, holds its records until these all reached the broker (or they could
        overtake these in a partition: a key's order). The task does not wait for that here,
        only when the next barrier comes first. The marker and the commit are the commit
        thread's (``commit_transaction`` delivers whatever is still queued first)."""
        self._reap()
        slot = self._open
        if slot is None:
            return []  # nothing written since the last barrier: no empty transaction
        if self._draining is not None:
            self._release(wait=True)  # this transaction's held records go out first
        self._slots[slot].producer.poll(0)
        self._out.check()
        seq = self._open_seq
        pending = PendingTransaction(slot, seq, checkpoint_id, tuple(self._open_records))
        self._pending.append(pending)
        self._open, self._open_records = None, []
        self._draining = slot
        c = self._context
        return [KafkaCommittable(c.job_id, c.attempt_number, self.ids, slot, seq, checkpoint_id)]

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[WriterState]:
        self._reap()
        return [WriterState(self.ids, len(self._slots), self._marker_topic, tuple(self._pending))]

    def commit_async(self, committable: KafkaCommittable) -> None:
        """Hand every pending transaction up to ``committable`` to the commit thread (in
        sequence order); a failure surfaces at the writer's next call."""
        self._reap()
        for p in sorted(self._pending, key=lambda p: p.seq):
            if p.seq > committable.seq:
                break
            self._commits.submit(p)

    def commit(self, committable: KafkaCommittable) -> None:
        """Commit every pending transaction up to ``committable`` and wait for it."""
        self.commit_async(committable)
        self._commits.drain(_REQUEST_TIMEOUT_S + _MARKER_TIMEOUT_S)
        self._reap()

    def _reap(self) -> None:
        """Take in what the commit thread finished: drop committed transactions from the
        pending ones, or raise its failure."""
        done, error = self._commits.collect()
        if done is not None:
            self._pending = [p for p in self._pending if p.seq > done]
            self._marker = max(self._marker, done)
        if error is not None:
            raise error

    def _commit_one(self, p: PendingTransaction) -> None:
        """On the commit thread: the marker, then the commit, of one pending transaction."""
        slot = self._slots[p.slot]
        try:
            self._send_marker(
                slot.producer,
                self.ids,
                self._marker_topic,
                self._group_metadata,
                p.seq,
                p.checkpoint_id,
            )
            call(slot.producer.commit_transaction, _REQUEST_TIMEOUT_S, f"commit of {slot.tid}")
        except KafkaSinkError as exc:
            # librdkafka reports a transaction the broker aborted (transaction.timeout.ms
            # passed) as it reports a fence by a newer owner: _FENCED. Taking the id back
            # here could fence a newer owner, so the job restarts instead; the restored
            # writer sends the records again (they are in the checkpoint's writer state).
            raise KafkaSinkError(
                f"{exc}; transaction {p.seq} of checkpoint {p.checkpoint_id} "
                f"({len(p.records)} records) could not be committed: if the broker aborted it "
                f"because transaction.timeout.ms ({self._sink.transaction_timeout_ms} ms) "
                "passed, raise it; the job restarts and writes these records again"
            ) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _LIVE_LOCK:
            key = (self._context.job_id, self._context.attempt_number, self.ids.marker_group)
            if _LIVE.get(key) is self:
                del _LIVE[key]
        try:
            # Transactions of completed checkpoints (the last one at the end of input) are
            # committed before the task ends; a failure fails it.
            self._commits.drain(_REQUEST_TIMEOUT_S + _MARKER_TIMEOUT_S)
            self._reap()
        finally:
            self._commits.stop()
            if self._open is not None:
                try:  # not pre-committed: belongs to no checkpoint
                    self._slots[self._open].producer.abort_transaction(5.0)
                except Exception:  # the next attempt's fence aborts it anyway
                    pass
            for slot in self._slots:
                slot.producer = None


class _CommitThread:
    """A writer's commits, one at a time in submission (sequence) order, on a daemon thread
    started on first use. After a failure it commits nothing more: the job restarts."""

    def __init__(self, commit_one: Callable[[PendingTransaction], None]) -> None:
        self._commit_one = commit_one  # the writer's marker-then-commit of one transaction
        self._queue: queue.Queue[PendingTransaction | None] = queue.Queue()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._submitted = -1  # highest seq handed over
        self._done: int | None = None  # highest seq committed, not yet collected
        self._settled = -1  # highest seq committed or failed
        self._error: BaseException | None = None
        self._reported = False  # the error is raised once, by the first call after it
        self._thread: threading.Thread | None = None
        self.news = False  # something to collect (read without the lock: a hint)

    def submit(self, p: PendingTransaction) -> None:
        if p.seq <= self._submitted:
            return
        self._submitted = p.seq
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kafka-sink-commit", daemon=True)
            self._thread.start()
        self._queue.put(p)

    def _run(self) -> None:
        while True:
            p = self._queue.get()
            if p is None:
                return
            error: BaseException | None = None
            if self._error is None:
                try:
                    self._commit_one(p)
                except BaseException as exc:  # handed to the task thread
                    error = exc
            with self._lock:
                if self._error is None and error is None:
                    self._done = p.seq
                elif self._error is None:
                    self._error = error
                self._settled = p.seq
                self.news = True
                self._changed.notify_all()

    def collect(self) -> tuple[int | None, BaseException | None]:
        with self._lock:
            done, error = self._done, None if self._reported else self._error
            self._done, self.news = None, False
            self._reported = self._error is not None
            return done, error

    def wait_one(self, timeout_s: float) -> bool:
        """Wait until one more submitted commit settled; False when none is in flight."""
        with self._lock:
            if self._settled >= self._submitted:
                return False
            before = self._settled
            return self._changed.wait_for(lambda: self._settled > before, timeout_s)

    def drain(self, timeout_s: float) -> None:
        with self._lock:
            if not self._changed.wait_for(lambda: self._settled >= self._submitted, timeout_s):
                raise KafkaSinkError(
                    f"Kafka sink: commits up to transaction {self._submitted} did not finish "
                    f"within {timeout_s:.0f} s"
                )

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)


def _fence(
    sink: KafkaSinkConfig, slots: Sequence[_Slot], on_delivery: Callable[[Any, Any], None]
) -> None:
    """A fresh producer per slot, ``init_transactions`` on all of them concurrently: each
    aborts what its id left open and fences older producers of the id."""
    from confluent_kafka import Producer

    errors: list[BaseException] = []

    def init(slot: _Slot) -> None:
        try:
            # Generous: a broker's first transactions wait for its transaction log to load.
            call(slot.producer.init_transactions, _REQUEST_TIMEOUT_S, f"init of {slot.tid}")
        except BaseException as exc:
            errors.append(exc)

    for slot in slots:
        slot.producer = Producer(
            producer_config(
                sink,
                {
                    "transactional.id": slot.tid,
                    "on_delivery": on_delivery,
                    "delivery.report.only.error": True,
                },
            )
        )
    threads = [threading.Thread(target=init, args=(s,), daemon=True) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        exc = errors[0]
        text = str(exc)
        if "INVALID_TRANSACTION_TIMEOUT" in text:
            text += (
                f" - transaction.timeout.ms = {sink.transaction_timeout_ms} exceeds the "
                "broker's transaction.max.timeout.ms (15 min by default): lower it with "
                "set_property or raise the broker's"
            )
        elif "_TIMED_OUT" in text or "TRANSPORT" in text:
            text += f" - is {sink.bootstrap_servers!r} reachable?"
        raise KafkaSinkError(text) from exc


def _coordinator_busy(exc: BaseException) -> bool:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    code = err.code() if isinstance(err, KafkaError) else None
    busy = (
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    )
    return code in busy or (isinstance(err, KafkaError) and err.retriable())


def _read_marker(sink: KafkaSinkConfig, group: str, topic: str) -> tuple[int, Any]:
    """The group's committed marker (-1: none) and its metadata for transactions. Only
    exact once the group's transactional ids are fenced: an in-flight commit is then
    complete, and the read waits for its offsets to be stable."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": sink.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    deadline = time.monotonic() + _REQUEST_TIMEOUT_S
    try:
        while True:
            try:
                committed = consumer.committed(
                    [TopicPartition(topic, 0)], timeout=max(1.0, deadline - time.monotonic())
                )
                break
            except KafkaException as exc:
                # The group's coordinator moving or loading (a broker just started) passes.
                if _coordinator_busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise KafkaSinkError(
                    f"Kafka sink ({sink.bootstrap_servers}): cannot read the marker of group "
                    f"{group!r}: {words(exc)}"
                ) from exc
        metadata = consumer.consumer_group_metadata()
    finally:
        consumer.close()
    offset = committed[0].offset if committed else -1
    return (offset if offset >= 0 else -1), metadata


class KafkaCommitter(Committer):
    """Commits a subtask's transactions through its live writer's commit thread (the task
    does not wait for Kafka). A restored committable is not live
    (``KafkaCommittable.live``): the writer that restores its state settles it."""

    def commit(self, committables: Sequence[Any]) -> None:
        for c in committables:
            if not isinstance(c, KafkaCommittable) or not c.live:
                continue
            with _LIVE_LOCK:
                writer = _LIVE.get((c.job_id, c.attempt, c.ids.marker_group))
            if writer is None:
                log.debug("Kafka sink: %s seq %d settled on restore", c.ids.marker_group, c.seq)
                continue
            writer.commit_async(c)
