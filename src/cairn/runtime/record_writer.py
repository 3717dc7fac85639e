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
records of its tag (``emit_side``). A latency marker goes to one channel at random (Flink's
``randomEmit``); records pending there go first: the marker waits with them (as in a Flink
buffer) and is sent right after them. A custom partitioning (``partition_custom``: a
``ChannelPartitioner``) is asked for every record's channel, also when there is one channel.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cairn.api.functions import key_function
from cairn.api.partitioning import CustomPartitioning
from cairn.events import LatencyMarker
from cairn.graph.job_graph import JobEdge
from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import OutputChannel
from cairn.runtime.eventtime.stamped import StampedBatch, slice_batch, stamp
from cairn.runtime.keyed_batch import with_key_groups
from cairn.state.key_groups import KeyGroupAssigner, subtask_for_key_group

DEFAULT_BATCH_SIZE = 1024

Emit = Callable[[list[Any]], None]


class ChannelPartitioner(Protocol):
    """What a custom partitioning edge carries (``datastream.partitioning.CustomPartitioning``):
    the channel of a record among ``num_partitions``, checked to be in range."""

    def channel(self, record: Any, num_partitions: int) -> int: ...


class RecordWriter:
    """One output edge of a task (see the module's invariant). ``key_selector`` is the hash
    partitioning's key, ``partitioner`` the custom partitioning's; ``emit`` is built once by
    the factory of the ``partition`` kind (``_hash_emit``, ``_custom_emit``,
    ``_fixed_emit``)."""

    def __init__(
        self,
        channels: Sequence[OutputChannel],
        partition: PartitionKind,
        *,
        key_selector: Callable[[Any], Any] | None = None,
        partitioner: ChannelPartitioner | None = None,
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
        self._selector = None if key_selector is None else key_function(key_selector)
        self._partitioner = partitioner
        # Latency markers waiting behind pending records, per channel: (records ahead, marker).
        self._held_markers: dict[int, list[tuple[int, LatencyMarker]]] | None = None
        # Set by ``_hash_emit`` for the stamped path: key -> key group, its cache, and key
        # group -> channel.
        self._key_group: Callable[[Any], int]
        self._key_group_cache: dict[Any, int]
        self._table: list[int]
        if partition is PartitionKind.HASH:
            if key_selector is None:
                raise ValueError("hash partitioning needs a key selector")
            self.emit: Emit = self._hash_emit(
                key_function(key_selector), max_parallelism, self._carry
            )
        elif partition is PartitionKind.CUSTOM:
            if partitioner is None:
                raise ValueError("custom partitioning needs its partitioner")
            self.emit = self._custom_emit(partitioner)
        else:
            self.emit = self._fixed_emit(partition)
        self._partition_emit = self.emit
        if output_tag is not None:
            self.emit = _ignore_main_output

    @classmethod
    def for_edge(
        cls,
        channels: Sequence[OutputChannel],
        edge: JobEdge,
        *,
        subtask_index: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        carry_key_groups: bool = False,
    ) -> RecordWriter:
        """The writer of a job graph's ``edge``: a hash edge's key selector, the
        ``CustomPartitioning`` a custom edge carries (in its ``key_selector`` field) as the
        partitioner, the consumer's key groups, the edge's side output."""
        selector = edge.key_selector
        custom = selector if isinstance(selector, CustomPartitioning) else None
        return cls(
            channels,
            edge.partition,
            key_selector=None if custom is not None else selector,
            partitioner=custom,
            max_parallelism=edge.target_max_parallelism,
            subtask_index=subtask_index,
            batch_size=batch_size,
            output_tag=edge.output_tag,
            carry_key_groups=carry_key_groups,
        )

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
            assert self._partitioner is not None
            choose = self._partitioner.channel
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
        if self._held_markers is not None:
            self._release_markers(index, full)

    def min_batch_size(self) -> int:
        """Smallest buffer size of this writer's channels (sources poll no more at once)."""
        channels = self.channels
        if len(channels) == 1:
            return channels[0].batch_size
        smallest = channels[0].batch_size
        for ch in channels:
            if ch.batch_size < smallest:
                smallest = ch.batch_size
        return smallest

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
            if self._held_markers is not None:
                self._release_markers(index, len(batch))

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        """Send ``marker`` on a random channel, behind the records pending there."""
        index = random.randrange(len(self.channels))
        ahead = len(self._pending[index])
        if not ahead:
            self.channels[index].send_event(marker)
            return
        held = self._held_markers
        if held is None:
            held = self._held_markers = {}
        held.setdefault(index, []).append((ahead, marker))

    def _release_markers(self, index: int, sent: int) -> None:
        """``sent`` records of channel ``index`` went out: so do the markers behind them."""
        held = self._held_markers
        assert held is not None
        waiting = held.get(index)
        if not waiting:
            return
        channel = self.channels[index]
        rest = []
        for ahead, marker in waiting:
            if ahead <= sent:
                channel.send_event(marker)
            else:
                rest.append((ahead - sent, marker))
        if rest:
            held[index] = rest
        else:
            del held[index]
            if not held:
                self._held_markers = None

    def flush_ready(self) -> bool:
        """Buffer timeout or idle task: flush the partly filled batches of the channels that
        can send them now; a channel waiting for credit keeps collecting. True if any went."""
        flushed = False
        channels = self.channels
        for i, pending in enumerate(self._pending):
            if pending and channels[i].accepts_partial():
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

    def _hash_emit(self, selector: Callable[[Any], Any], max_parallelism: int, carry: bool) -> Emit:
        """``emit`` of a hash edge: key -> key group (the assigner's cache first) -> channel; with
        ``carry``, each record's key group goes along. Also keeps the key group lookup
        and the channel table its stamped path uses."""
        n = len(self.channels)
        assigner = KeyGroupAssigner(max_parallelism)
        table = [subtask_for_key_group(max_parallelism, n, kg) for kg in range(max_parallelism)]
        key_group = assigner.key_group
        cached = assigner.cache.get  # a hit without the call to key_group: -25 % here
        self._key_group = key_group
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

        if not carry:
            return emit_hash
        self._pending_kgs = [[] for _ in self.channels]
        return emit_hash_carrying

    def _custom_emit(self, partitioner: ChannelPartitioner) -> Emit:
        """``emit`` of a custom partitioning: the partitioner names every record's channel, also
        when there is one."""
        choose = partitioner.channel
        n = len(self.channels)

        def emit_custom(records: list[Any]) -> None:
            if type(records) is not list or self._stamped:
                self._emit_stamped(records)
                return
            pending = self._pending
            for r in records:
                pending[choose(r, n)].append(r)
            self._flush_full()

        return emit_custom

    def _fixed_emit(self, partition: PartitionKind) -> Emit:
        """``emit`` of the partitionings that look at no record: one channel, all of them, random
        or round-robin."""
        one = partition is PartitionKind.FORWARD or partition is PartitionKind.GLOBAL
        if one or len(self.channels) == 1:
            return self._emit_single
        if partition is PartitionKind.BROADCAST:
            return self._emit_broadcast
        if partition is PartitionKind.SHUFFLE:
            return self._emit_shuffle
        return self._emit_round_robin  # REBALANCE, RESCALE: round-robin over records


def _ignore_main_output(records: list[Any]) -> None:
    """``emit`` of a side-output writer: the main output is not for it."""
