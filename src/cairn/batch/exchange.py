"""The data of a BATCH exchange: records travel in blocks, grouped by key on the producer.

Invariant: a block holds records of one output edge, from one producer partition, for one
consumer partition, in the producer's order; its sort key orders a consumer partition's
blocks so that it reads every unkeyed block first (input side, producer, block number: each
producer's order kept), then the keyed blocks key group by key group. A keyed block is one
key group's records grouped by key (a dict: equal keys are one key, as for the keyed state
backend); the reader merges one key group's blocks at a time, orders its keys by
``key_token`` and each key's records by timestamp (stable: records of one key without
timestamps keep their producers' order), so a keyed head reads its input key by key (Flink's
sorted inputs) while a partition never holds more than one key group of input. Sorting and
(de)serialization happen per block, not per record: the per-record work is the key
selector, a dict lookup and an append.

>>> from cairn.graph.job_graph import JobEdge
>>> from cairn.graph.transformations import PartitionKind
>>> from cairn.ids import VertexId
>>> from cairn.batch.plan import EdgeRouter, StageInput
>>> e = JobEdge(VertexId(0), VertexId(1), PartitionKind.HASH, lambda r: r[0], 128, 0)
>>> writer = BlockWriter([(1, EdgeRouter(StageInput(e, 1, keyed=True), 1, 0))], 0, 0)
>>> writer.output(None)([("b", 1), ("a", 2), ("b", 3)])
>>> blocks = sorted((key, block) for _, _, key, block in writer.take(final=True))
>>> [(is_key, chunks) for is_key, chunks in read_blocks(blocks)]
[(True, [(0, [('a', 2)], None)]), (True, [(0, [('b', 1), ('b', 3)], None)])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from cairn.batch.plan import KEYED, NO_TIMESTAMP, UNKEYED, EdgeRouter, key_token
from cairn.runtime.eventtime.stamped import StampedBatch

__all__ = [
    "BLOCK_RECORDS",
    "COLLECTED",
    "BlockWriter",
    "Chunk",
    "Out",
    "SortedBlock",
    "read_blocks",
]

BLOCK_RECORDS = 1 << 16  # records buffered by a producer partition before its blocks go out

# An output: (consumer vertex, partition, sort key, payload). The payload of a block is
# ``(side, records, stamps)`` (unkeyed) or ``(side, groups, stamped)`` (keyed: key ->
# records, and key -> [(timestamp, record)] for records that carry one). A consumer vertex
# of COLLECTED marks records for ``execute_and_collect`` (partition: the collect sink's
# transformation id, payload: the records).
Out = tuple[int, int, tuple[Any, ...], Any]
COLLECTED = -1
# What a consumer reads, in sort-key order: (sort key, payload).
SortedBlock = tuple[tuple[Any, ...], Any]
# Records for one input side, with their timestamps (``None``: none carries one).
Chunk = tuple[int, list[Any], list[int | None] | None]

_FIRST = itemgetter(0)


class _Unkeyed:
    __slots__ = ("records", "stamps")

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.stamps: list[int | None] | None = None

    def add(self, record: Any, ts: int | None) -> None:
        if ts is not None and self.stamps is None:
            self.stamps = [None] * len(self.records)
        self.records.append(record)
        if self.stamps is not None:
            self.stamps.append(ts)


class _Edge:
    """One output edge of a producer partition: its buffers per target partition (unkeyed)
    or per key (keyed: key groups and targets are looked up per key as blocks go out)."""

    def __init__(self, consumer: int, router: EdgeRouter) -> None:
        self.consumer = consumer
        self.router = router
        self.side = router.edge.input_side
        self.keyed = router.keyed_hash
        self.unkeyed: dict[int, _Unkeyed] = {}  # target partition -> buffer
        self.groups: dict[Any, list[Any]] = {}  # key -> records
        self.stamped: dict[Any, list[tuple[int | None, Any]]] = {}  # key -> (time, record)

    def add(self, records: list[Any], stamps: list[int | None] | None, seq: int) -> None:
        if self.keyed:
            if stamps is None:
                self._add_keyed(records)
            else:
                self._add_stamped(records, stamps)
            return
        targets, unkeyed = self.router.targets, self.unkeyed
        for i, r in enumerate(records):
            ts = stamps[i] if stamps is not None else None
            for part in targets(r, seq + i):
                buffer = unkeyed.get(part)
                if buffer is None:
                    buffer = unkeyed[part] = _Unkeyed()
                buffer.add(r, ts)

    def _add_keyed(self, records: list[Any]) -> None:
        # The hot path of a keyed exchange: the key selector, one dict lookup, one append
        # (key groups are computed per key when the blocks go out).
        select = self.router.key_lookup()[0]
        by_key = self.groups
        for r in records:
            key = select(r)
            same = by_key.get(key)
            if same is None:
                by_key[key] = [r]
            else:
                same.append(r)

    def _add_stamped(self, records: list[Any], stamps: list[int | None]) -> None:
        select = self.router.key_lookup()[0]
        by_key = self.stamped
        for r, ts in zip(records, stamps, strict=True):
            key = select(r)
            same = by_key.get(key)
            if same is None:
                by_key[key] = [(ts, r)]
            else:
                same.append((ts, r))

    def _by_key_group(self) -> dict[int, tuple[dict[Any, Any], dict[Any, Any]]]:
        _, cache, key_group = self.router.key_lookup()
        out: dict[int, tuple[dict[Any, Any], dict[Any, Any]]] = {}
        for index, by_key in enumerate((self.groups, self.stamped)):
            for key, records in by_key.items():
                kg = cache.get(key)
                if kg is None:
                    kg = key_group(key)
                both = out.get(kg)
                if both is None:
                    both = out[kg] = ({}, {})
                both[index][key] = records
        return out

    def drain(self, producer: tuple[int, int], number: Callable[[], int]) -> Iterator[Out]:
        side, consumer = self.side, self.consumer
        for part, buffer in self.unkeyed.items():
            in_order = (UNKEYED, side, *producer, number())
            yield consumer, part, in_order, (side, buffer.records, buffer.stamps)
        self.unkeyed = {}
        if not (self.groups or self.stamped):
            return
        target = self.router.target_of_key_group
        by_key_group = self._by_key_group()
        for kg in sorted(by_key_group):
            groups, stamped = by_key_group[kg]
            order = (KEYED, kg, side, *producer, number())
            yield consumer, target(kg), order, (side, groups, stamped)
        self.groups, self.stamped = {}, {}


class BlockWriter:
    """A producer partition's outputs, routed by every output edge (side outputs by their
    tag) into blocks; ``take()`` hands out the blocks once enough records are buffered
    (always with ``final``), and the collected records."""

    def __init__(
        self, routers: Sequence[tuple[int, EdgeRouter]], vertex: int, partition: int
    ) -> None:
        self._edges_by_tag: dict[str | None, list[_Edge]] = {}
        self._edges: list[_Edge] = []
        for consumer, router in routers:
            edge = _Edge(consumer, router)
            self._edges.append(edge)
            self._edges_by_tag.setdefault(router.edge.output_tag, []).append(edge)
        self._producer = (vertex, partition)
        self._seq = 0  # the producer's record count: round robin and order
        self._blocks = 0
        self._buffered = 0
        self._collected: list[Out] = []

    def tags(self) -> list[str]:
        return [t for t in self._edges_by_tag if t is not None]

    @property
    def records_out(self) -> int:
        """Records emitted so far (main and side outputs; Flink's ``numRecordsOut``)."""
        return self._seq

    def output(self, tag: str | None) -> Callable[[list[Any]], None]:
        edges = self._edges_by_tag.get(tag, [])

        def emit(records: list[Any]) -> None:
            stamps = records.timestamps if type(records) is StampedBatch else None
            if stamps is not None and all(t is None for t in stamps):
                stamps = None
            for edge in edges:
                edge.add(records, stamps, self._seq)
            self._seq += len(records)
            self._buffered += len(records) * len(edges)

        return emit

    def collect(self, transformation_id: int) -> Callable[[list[Any]], None]:
        def emit(records: list[Any]) -> None:
            self._collected.append((COLLECTED, transformation_id, (), list(records)))

        return emit

    def take(self, final: bool = False) -> list[Out]:
        out, self._collected = self._collected, []
        if final or self._buffered >= BLOCK_RECORDS:
            for edge in self._edges:
                out.extend(edge.drain(self._producer, self._next_block))
            self._buffered = 0
        return out

    def _next_block(self) -> int:
        self._blocks += 1
        return self._blocks


def read_blocks(blocks: Iterable[SortedBlock]) -> Iterator[tuple[bool, list[Chunk]]]:
    """What a consumer partition reads from its blocks (in sort-key order): ``(False,
    chunks)`` per unkeyed block, then ``(True, chunks)`` per key, key group by key group,
    a key's chunks in timestamp order."""
    group_key: tuple[Any, ...] | None = None
    pending: list[Any] = []
    for key, payload in blocks:
        if key[0] != KEYED:
            side, records, stamps = payload
            yield False, [(side, records, stamps)]
            continue
        if group_key is not None and key[1] != group_key[1]:
            yield from _keys_of(pending)
            pending = []
        group_key = key
        pending.append(payload)
    if pending:
        yield from _keys_of(pending)


def _keys_of(payloads: list[Any]) -> Iterator[tuple[bool, list[Chunk]]]:
    """One key group's keyed blocks as each key's chunks, the keys in ``key_token`` order."""
    merged: dict[Any, list[tuple[int, list[Any], bool]]] = {}
    for side, groups, stamped in payloads:
        for key, records in groups.items():
            merged.setdefault(key, []).append((side, records, False))
        for key, pairs in stamped.items():
            merged.setdefault(key, []).append((side, pairs, True))
    for key in sorted(merged, key=key_token):
        yield True, _in_time_order(merged[key])


def _in_time_order(parts: list[tuple[int, list[Any], bool]]) -> list[Chunk]:
    if len(parts) == 1 and not parts[0][2]:
        side, records, _ = parts[0]
        return [(side, records, None)]
    if all(not stamped for _, _, stamped in parts) and len({p[0] for p in parts}) == 1:
        return [(parts[0][0], [r for _, records, _ in parts for r in records], None)]
    # Mixed sides or timestamps: one stable sort by timestamp, then runs of one side.
    entries: list[tuple[int, int, int | None, Any]] = []
    for side, items, stamped in parts:
        if stamped:
            entries.extend((NO_TIMESTAMP if ts is None else ts, side, ts, r) for ts, r in items)
        else:
            entries.extend((NO_TIMESTAMP, side, None, r) for r in items)
    entries.sort(key=_FIRST)
    chunks: list[Chunk] = []
    for _, side, ts, record in entries:
        if not chunks or chunks[-1][0] != side:
            chunks.append((side, [], []))
        chunks[-1][1].append(record)
        chunks[-1][2].append(ts)  # type: ignore[union-attr]
    return [
        (side, records, None if all(t is None for t in stamps) else stamps)  # type: ignore[union-attr]
        for side, records, stamps in chunks
    ]
