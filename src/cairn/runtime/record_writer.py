"""Record writers: partition a task's output batches over the channels of one output edge.

Invariant: records of one writer reach each channel in emission order; pending records are
flushed into their channel before any event (barrier, end of partition) is sent on it, so an
aligned barrier never overtakes a record emitted before it; a channel's buffer is flushed once
it holds the channel's ``batch_size`` records (the receiver may lower it: debloating), and
partly filled on a buffer timeout only when the channel can send it at once. A hash writer
told to ``carry_key_groups`` sends its plain batches as ``KeyGroupedBatch``es, each record with
the key group that chose its channel (the consumer need not look it up again), and its stamped
batches with ``key_groups`` beside ``timestamps``. Timestamps stay
with their records: once a ``StampedBatch`` came through, the writer keeps every pending list
stamped (records without a timestamp get ``None``), so plain batches cost one type check.
A writer of a side output (``output_tag``) ignores the main output (``emit``) and takes the
records of its tag (``emit_side``). A custom partitioning (``partition_custom``) is asked for
every record's channel, also when there is one channel.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import OutputChannel
from cairn.runtime.eventtime.stamped import StampedBatch, slice_batch, stamp
from cairn.runtime.keyed_batch import with_key_groups
from cairn.state.key_groups import KeyGroupAssigner, subtask_for_key_group

DEFAULT_BATCH_SIZE = 1024


class RecordWriter:
    def __init__(
        self,
        channels: Sequence[OutputChannel],
        partition: PartitionKind,
        *,
        key_selector: Callable[[Any], Any] | None = None,
        max_parallelism: int = 128,
        subtask_index: int = 0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        output_tag: str | None = None,
        carry_key_groups: bool = False,
    ) -> None:
        if not channels:
            raise ValueError("a record writer needs at least one channel")
        self.channels = list(channels)
        self.partition = partition
        self.batch_size = batch_size
        for ch in self.channels:
            ch.batch_size = batch_size
        self._pending: list[list[Any]] = [[] for _ in self.channels]
        # Hash partitioning with ``carry_key_groups``: each pending record's key group, sent
        # along as a ``KeyGroupedBatch`` (a stamped writer keeps them in its stamped batches).
        self._pending_kgs: list[list[int]] | None = None
        self._carry = carry_key_groups and partition is PartitionKind.HASH
        self._rr = subtask_index % len(self.channels)
        self.records_out = 0
        self.output_tag = output_tag
        self._stamped = False  # a stamped batch came through: keep pending lists stamped
        self._selector = key_selector
        n = len(self.channels)
        if partition is PartitionKind.HASH:
            if key_selector is None:
                raise ValueError("hash partitioning needs a key selector")
            assigner = KeyGroupAssigner(max_parallelism)
            table = [subtask_for_key_group(max_parallelism, n, kg) for kg in range(max_parallelism)]
            key_group = assigner.key_group
            cached = assigner.cache.get  # a hit without the call to key_group: -25 % here
            selector = key_selector

            self._key_group = assigner.key_group
            self._key_group_cache = assigner.cache
            self._table = table

            def emit_hash(records: list[Any]) -> None:
                if type(records) is not list or self._stamped:
                    self._emit_stamped(records)
                    return
                pending = self._pending
                for r in records:
                    k = selector(r)
                    kg = cached(k)
                    if kg is None:
                        kg = key_group(k)
                    pending[table[kg]].append(r)
                self._flush_full()

            def emit_hash_carrying(records: list[Any]) -> None:
                if type(records) is not list or self._stamped:
                    self._emit_stamped(records)
                    return
                pending = self._pending
                kgs = self._pending_kgs
                assert kgs is not None
                for r in records:
                    k = selector(r)
                    kg = cached(k)
                    if kg is None:
                        kg = key_group(k)
                    c = table[kg]
                    pending[c].append(r)
                    kgs[c].append(kg)
                self._flush_full()

            if carry_key_groups:
                self._pending_kgs = [[] for _ in self.channels]
                emit_hash = emit_hash_carrying
            self.emit: Callable[[list[Any]], None] = emit_hash
        elif partition is PartitionKind.CUSTOM:
            if key_selector is None:
                raise ValueError("custom partitioning needs its partitioner and key selector")
            choose = key_selector.channel  # type: ignore[attr-defined]

            def emit_custom(records: list[Any]) -> None:
                if type(records) is not list or self._stamped:
                    self._emit_stamped(records)
                    return
                pending = self._pending
                for r in records:
                    pending[choose(r, n)].append(r)
                self._flush_full()

            self.emit = emit_custom
        elif partition is PartitionKind.FORWARD or n == 1 or partition is PartitionKind.GLOBAL:
            self.emit = self._emit_single
        elif partition is PartitionKind.BROADCAST:
            self.emit = self._emit_broadcast
        elif partition is PartitionKind.SHUFFLE:
            self.emit = self._emit_shuffle
        else:  # REBALANCE, RESCALE: round-robin over records
            self.emit = self._emit_round_robin
        self._partition_emit = self.emit
        if output_tag is not None:
            self.emit = _ignore_main_output

    # -------------------------------------------------------------------- partitioners

    def emit_side(self, records: list[Any]) -> None:
        """Records of this writer's side output (``output_tag``)."""
        self._partition_emit(records)

    def _emit_single(self, records: list[Any]) -> None:
        if type(records) is not list or self._stamped:
            self._emit_stamped(records)
            return
        pending = self._pending[0]
        pending.extend(records)
        size = self.channels[0].batch_size
        if len(pending) >= size:
            if size < self.batch_size and len(pending) > size:
                self._flush_in_buffers(0, size)
            else:
                self.flush_channel(0)

    def _emit_broadcast(self, records: list[Any]) -> None:
        if type(records) is not list or self._stamped:
            self._emit_stamped(records)
            return
        for pending in self._pending:
            pending.extend(records)
        self._flush_full()

    def _emit_round_robin(self, records: list[Any]) -> None:
        if type(records) is not list or self._stamped:
            self._emit_stamped(records)
            return
        n = len(self._pending)
        start = self._rr
        for k in range(n):
            part = records[k::n]
            if part:
                self._pending[(start + k) % n].extend(part)
        self._rr = (start + len(records)) % n
        self._flush_full()

    def _emit_shuffle(self, records: list[Any]) -> None:
        if type(records) is not list or self._stamped:
            self._emit_stamped(records)
            return
        n = len(self._pending)
        pending = self._pending
        rand = random.randrange
        for r in records:
            pending[rand(n)].append(r)
        self._flush_full()

    def _stamped_pending(self) -> list[StampedBatch]:
        """The pending lists as stamped batches (records without a timestamp get ``None``)."""
        self._stamped = True
        kgs = self._pending_kgs
        self._pending_kgs = None  # from now on in the stamped batches' ``key_groups``
        stamped: list[StampedBatch] = []
        for i, p in enumerate(self._pending):
            if not isinstance(p, StampedBatch):
                p = self._pending[i] = stamp(p, [None] * len(p))
                if self._carry:
                    p.key_groups = kgs[i] if kgs is not None else []
            stamped.append(p)
        return stamped

    def _emit_stamped(self, records: list[Any]) -> None:
        """Any partitioner, for records with timestamps (slower: both lists move)."""
        stamps = records.timestamps if type(records) is StampedBatch else [None] * len(records)
        pending = self._stamped_pending()
        n = len(pending)
        partition = self.partition
        if partition is PartitionKind.HASH:
            key_group, table, selector = self._key_group, self._table, self._selector
            assert selector is not None
            cached = self._key_group_cache.get
            appends = [p.append for p in pending]
            stamp_appends = [p.timestamps.append for p in pending]
            if self._carry:  # two loops, not a test per record: the window path is the other
                kg_appends = [p.key_groups.append for p in pending]
                for r, t in zip(records, stamps, strict=True):
                    k = selector(r)
                    kg = cached(k)
                    if kg is None:
                        kg = key_group(k)
                    c = table[kg]
                    appends[c](r)
                    stamp_appends[c](t)
                    kg_appends[c](kg)
            else:
                for r, t in zip(records, stamps, strict=True):
                    k = selector(r)
                    kg = cached(k)
                    if kg is None:
                        kg = key_group(k)
                    c = table[kg]
                    appends[c](r)
                    stamp_appends[c](t)
        elif partition is PartitionKind.CUSTOM:
            choose = self._selector.channel  # type: ignore[union-attr]
            for r, t in zip(records, stamps, strict=True):
                p = pending[choose(r, n)]
                p.append(r)
                p.timestamps.append(t)
        elif partition is PartitionKind.BROADCAST:
            for p in pending:
                p.extend(records)
                p.timestamps.extend(stamps)
        elif n == 1 or partition in (PartitionKind.FORWARD, PartitionKind.GLOBAL):
            pending[0].extend(records)
            pending[0].timestamps.extend(stamps)
        elif partition is PartitionKind.SHUFFLE:
            rand = random.randrange
            for r, t in zip(records, stamps, strict=True):
                p = pending[rand(n)]
                p.append(r)
                p.timestamps.append(t)
        else:
            start = self._rr
            for k in range(n):
                p = pending[(start + k) % n]
                p.extend(records[k::n])
                p.timestamps.extend(stamps[k::n])
            self._rr = (start + len(records)) % n
        self._flush_full()

    # -------------------------------------------------------------------- flushing

    def _flush_full(self) -> None:
        channels = self.channels
        for i, pending in enumerate(self._pending):
            size = channels[i].batch_size
            if len(pending) >= size:
                if size < self.batch_size and len(pending) > size:
                    self._flush_in_buffers(i, size)
                else:
                    self.flush_channel(i)

    def _flush_in_buffers(self, index: int, size: int) -> None:
        """Debloated channel: send full buffers of ``size`` records, keep the rest pending."""
        pending = self._pending[index]
        kgs = self._pending_kgs
        sendable = pending if kgs is None else with_key_groups(pending, kgs[index])
        full = len(pending) - len(pending) % size
        channel = self.channels[index]
        for start in range(0, full, size):
            channel.send_batch(slice_batch(sendable, start, start + size))
        self.records_out += full
        self._pending[index] = slice_batch(pending, full, len(pending))
        if kgs is not None:
            kgs[index] = kgs[index][full:]

    def min_batch_size(self) -> int:
        """Smallest buffer size of this writer's channels (sources poll no more at once)."""
        return min(ch.batch_size for ch in self.channels)

    def flush_channel(self, index: int) -> None:
        batch = self._pending[index]
        if batch:
            self._pending[index] = []
            kgs = self._pending_kgs
            if kgs is not None:
                batch = with_key_groups(batch, kgs[index])
                kgs[index] = []
            self.records_out += len(batch)
            self.channels[index].send_batch(batch)

    def flush_ready(self) -> bool:
        """Buffer timeout or idle task: flush the partly filled batches of the channels that
        can send them now; a channel waiting for credit keeps collecting. True if any went."""
        flushed = False
        channels = self.channels
        for i, pending in enumerate(self._pending):
            if pending:
                channel = channels[i]
                if not channel.accepts_partial():
                    channel.hold()
                    # Announced first, then looked again: a credit or send racing with the
                    # announcement is seen here, or its thread sees the announcement and
                    # wakes the task (no lost wake-up).
                    if not channel.accepts_partial():
                        continue
                self.flush_channel(i)
                flushed = True
        return flushed

    def flush_all(self) -> None:
        for i in range(len(self._pending)):
            self.flush_channel(i)

    def has_pending(self) -> bool:
        return any(self._pending)

    def broadcast_event(self, event: Any) -> None:
        self.flush_all()
        for ch in self.channels:
            ch.send_event(event)

    def available(self) -> bool:
        for ch in self.channels:
            if not ch.available():
                return False
        return True


def _ignore_main_output(records: list[Any]) -> None:
    """``emit`` of a side-output writer: the main output is not for it."""
