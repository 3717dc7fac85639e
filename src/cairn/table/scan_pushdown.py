"""Pushing projections, filters and the watermark into a scan that evaluates them on Arrow
batches (Flink's ``SupportsProjectionPushDown``, ``SupportsFilterPushDown`` and
``SupportsWatermarkPushDown``, applied by its ``PushProjectIntoTableSourceScanRule``,
``PushFilterIntoTableSourceScanRule`` and ``PushWatermarkIntoTableSourceScanRule``).

Invariant: pure, and a rewritten plan computes what it computed before — the same rows in the
same order, the same record timestamps and the same watermarks. A scan takes pushed work only
when its connector offers a ``ScanPushdown`` (``StreamScan.pushdown``) and every pushed
expression is ``arrow_supported``; its ``ScanSpec`` keeps every expression over the file's own
columns. A ``Calc`` over a scan folds into its spec (projections replace, conditions are
AND-ed, the lower one first); a ``WatermarkAssigner`` folds in only while no filter was pushed
(its generator sees every row the scan reads, as the assigner saw every row before).
Anything else stays where it was.

>>> from cairn.table.analysis import Columns, Rex
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.INT()), ("v", DataTypes.STRING())])
>>> spec = ScanSpec.identity(cols)
>>> k = Rex("input", DataTypes.INT(), index=0)
>>> spec.read, spec.projections == (k, Rex("input", DataTypes.STRING(), index=1))
((0, 1), True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from cairn.table.analysis import Column, Columns, Rex, conjunction, conjuncts, input_references
from cairn.table.arrow_eval import arrow_supported
from cairn.table.plan import Calc, PlanNode, StreamScan, WatermarkAssigner, with_inputs

__all__ = ["ScanPushdown", "ScanSpec", "push_into_scans", "share_scans"]


@dataclass(frozen=True)
class ScanSpec:
    """What a scan computes from each row of its files (``file_columns``): ``condition``
    keeps rows, ``projections`` make the emitted row, ``rowtime`` is the event time (epoch
    ms of a ``TIMESTAMP``) every row read feeds the watermark with, ``delay_ms`` behind
    (``idle_ms``: the idle timeout, 0 for none); all over the file's columns."""

    file_columns: Columns
    projections: tuple[Rex, ...]
    condition: Rex | None = None
    rowtime: Rex | None = None
    delay_ms: int = 0
    idle_ms: int = 0

    @staticmethod
    def identity(columns: Columns) -> ScanSpec:
        refs = tuple(Rex("input", c.data_type, index=i) for i, c in enumerate(columns.columns))
        return ScanSpec(columns, refs)

    @property
    def read(self) -> tuple[int, ...]:
        """The file columns any expression reads, in file order."""
        rexes = [*self.projections, *(r for r in (self.condition, self.rowtime) if r)]
        return tuple(sorted(set(input_references(rexes))))

    def describe(self) -> str:
        """The pushed parts as ``explain`` shows them (Flink's ``project=[...]``...)."""
        names = self.file_columns.names
        parts = [f"project=[{', '.join(names[i] for i in self.read)}]"]
        if self.condition is not None:
            parts.append(f"filter=[{_text(self.condition, names)}]")
        if self.rowtime is not None:
            parts.append(
                f"watermark=[{_text(self.rowtime, names)} - {self.delay_ms}:INTERVAL SECOND]"
            )
        return ", ".join(parts)


class ScanPushdown(Protocol):
    """A connector's offer: the scan of its table computing ``spec``."""

    def build(self, spec: ScanSpec) -> Any:
        """``build(env)`` of the scan (a DataStream of ``(kind, row)`` records, stamped and
        with watermarks when ``spec.rowtime`` is set)."""


def push_into_scans(node: PlanNode) -> PlanNode:
    """``node``'s plan with every calc and watermark assigner that can move into the scan
    below it moved there, bottom up; then scans of one table that differ only in what they
    project share one scan (``share_scans``)."""
    return share_scans(_pushed(node))


def share_scans(plan: PlanNode) -> PlanNode:
    """Pushed scans of one table with the same filter and watermark read once (Flink's
    ``ScanReuser``): one scan projects the union of their columns, and a calc over it
    picks each one's (a column selection costs less than parsing the files again)."""
    groups: dict[tuple[int, str], list[StreamScan]] = {}
    for scan in _pushed_scans(plan):
        spec = scan.spec
        key = (id(scan.pushdown), repr((spec.condition, spec.rowtime, spec.delay_ms, spec.idle_ms)))
        group = groups.setdefault(key, [])
        if all(scan is not other for other in group):
            group.append(scan)
    replaced: dict[int, PlanNode] = {}
    for group in groups.values():
        if len({repr(s.spec.projections) for s in group}) < 2:
            continue  # equal specs share their source already (one DataStream per spec)
        union: list[Rex] = []
        names: list[Column] = []
        rowtimes: list[int] = []
        for scan in group:
            for i, rex in enumerate(scan.spec.projections):
                if rex not in union:
                    union.append(rex)
                    column = scan.columns.columns[i]
                    taken = {c.name for c in names}
                    name = column.name
                    while name in taken:
                        name += "0"
                    names.append(Column(name, column.data_type))
                if i in scan.rowtimes and union.index(rex) not in rowtimes:
                    rowtimes.append(union.index(rex))
        first = group[0]
        spec = dataclasses.replace(first.spec, projections=tuple(union))
        shared = _scan(first, Columns(tuple(names)), spec, tuple(sorted(rowtimes)))
        for scan in group:
            picks = tuple(
                Rex("input", c.data_type, index=union.index(rex))
                for rex, c in zip(scan.spec.projections, scan.columns.columns, strict=True)
            )
            if [p.index for p in picks] == list(range(len(union))):
                replaced[id(scan)] = shared  # it reads every column, in order
            else:
                replaced[id(scan)] = Calc(columns=scan.columns, input=shared, projections=picks)
    return _replaced(plan, replaced) if replaced else plan


def _pushed_scans(node: PlanNode) -> Iterator[StreamScan]:
    if isinstance(node, StreamScan) and node.spec is not None:
        yield node
    for i in node.inputs:
        yield from _pushed_scans(i)


def _replaced(node: PlanNode, replaced: dict[int, PlanNode]) -> PlanNode:
    if id(node) in replaced:
        return replaced[id(node)]
    inputs = node.inputs
    if not inputs:
        return node
    new = tuple(_replaced(i, replaced) for i in inputs)
    if all(n is i for n, i in zip(new, inputs, strict=True)):
        return node
    return with_inputs(node, new)


def _pushed(node: PlanNode) -> PlanNode:
    inputs = node.inputs
    if inputs:
        pushed = tuple(_pushed(i) for i in inputs)
        if any(p is not i for p, i in zip(pushed, inputs, strict=True)):
            node = with_inputs(node, pushed)
    if isinstance(node, Calc | WatermarkAssigner):
        scan = node.input
        if isinstance(scan, StreamScan) and scan.pushdown is not None:
            spec = scan.spec if scan.spec is not None else ScanSpec.identity(scan.columns)
            folded = _fold(node, spec)
            if folded is not None:
                return _scan(scan, node.columns, folded, _rowtimes(node, scan))
            if isinstance(node, Calc):
                return _split(node, scan, spec)
    return node


def _split(node: Calc, scan: StreamScan, spec: ScanSpec) -> PlanNode:
    """A calc the scan cannot compute whole: its conditions the scan can check and the
    columns it reads go into the scan; the rest stays in a calc over it."""
    below = spec.projections
    conditions = conjuncts(node.condition)
    pushed = [c for c in conditions if arrow_supported(_inline(c, below))]
    kept = [c for c in conditions if not any(c is p for p in pushed)]
    projections = node.projections
    if projections is None:
        projections = tuple(Rex("input", t, index=i) for i, t in enumerate(scan.columns.types))
    used = sorted(set(input_references([*projections, *kept])))
    if not pushed and len(used) == len(scan.columns):
        return node
    inlined = [_inline(c, below) for c in pushed]
    narrowed = dataclasses.replace(
        spec,
        projections=tuple(below[i] for i in used),
        condition=conjunction([c for c in (spec.condition, *inlined) if c is not None]),
    )
    columns = Columns(tuple(scan.columns.columns[i] for i in used))
    rowtimes = tuple(k for k, i in enumerate(used) if i in scan.rowtimes)
    position = {i: k for k, i in enumerate(used)}
    return Calc(
        columns=node.columns,
        input=_scan(scan, columns, narrowed, rowtimes),
        projections=tuple(_renumber(p, position) for p in projections),
        condition=conjunction([_renumber(c, position) for c in kept]),
    )


def _fold(node: Calc | WatermarkAssigner, spec: ScanSpec) -> ScanSpec | None:
    below = spec.projections
    if isinstance(node, WatermarkAssigner):
        if spec.rowtime is not None or spec.condition is not None:
            return None
        rowtime = below[node.time_index]
        if not arrow_supported(rowtime) or rowtime.data_type.root != "TIMESTAMP":
            return None
        return dataclasses.replace(
            spec, rowtime=rowtime, delay_ms=node.delay_ms, idle_ms=node.idle_timeout_ms
        )
    projections = below
    if node.projections is not None:
        projections = tuple(_inline(p, below) for p in node.projections)
    upper = None if node.condition is None else _inline(node.condition, below)
    pushed = (*projections, *(() if upper is None else (upper,)))
    if not all(arrow_supported(r) for r in pushed):
        return None
    condition = conjunction([c for c in (spec.condition, upper) if c is not None])
    return dataclasses.replace(spec, projections=projections, condition=condition)


def _rowtimes(node: Calc | WatermarkAssigner, scan: StreamScan) -> tuple[int, ...]:
    """The output positions that are event-time attributes with the scan's watermarks."""
    if isinstance(node, WatermarkAssigner):
        return tuple(sorted({*scan.rowtimes, node.time_index}))
    if node.projections is None:
        return scan.rowtimes
    return tuple(
        i for i, p in enumerate(node.projections) if p.kind == "input" and p.index in scan.rowtimes
    )


def _scan(
    scan: StreamScan, columns: Columns, spec: ScanSpec, rowtimes: tuple[int, ...]
) -> StreamScan:
    return dataclasses.replace(
        scan,
        columns=columns,
        build=scan.pushdown.build(spec),
        spec=spec,
        rowtimes=rowtimes,
    )


def _inline(rex: Rex, projections: tuple[Rex, ...]) -> Rex:
    """``rex`` over the scan's file columns: each reference replaced by its expression."""
    if rex.kind == "input":
        return projections[rex.index]
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_inline(o, projections) for o in rex.operands))


def _renumber(rex: Rex, position: dict[int, int]) -> Rex:
    """``rex`` over the narrowed scan: each reference to column ``i`` now ``position[i]``."""
    if rex.kind == "input":
        return dataclasses.replace(rex, index=position[rex.index])
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_renumber(o, position) for o in rex.operands))


def _text(rex: Rex, names: list[str]) -> str:
    if rex.kind == "input":
        return names[rex.index]
    if rex.kind == "literal":
        return repr(rex.value)
    return f"{rex.op}({', '.join(_text(o, names) for o in rex.operands)})"
