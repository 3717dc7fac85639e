"""The text of a logical plan: each node as Flink's plans print it, and the tree with its
changelog modes (``Table.explain()``).

Invariant: pure and read-only — the text of a node is derived from its fields and its input's
column names only (never a job's state or a TTL), so it also serves as the content a node's
operator uid is hashed from (``translate.plan_uid``).

>>> from cairn.table.analysis import AggCall, Columns
>>> from cairn.table.plan import Aggregate, Values
>>> from cairn.table.types import DataTypes
>>> scan = Values((("a", 1),), Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT())]))
>>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
>>> agg = Aggregate(scan, (0,), (n,), Columns.of([("k", DataTypes.STRING()), ("n", n.data_type)]))
>>> print(explain(agg))
GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS n]) changelogMode=[I,UB,UA,D]
+- Values(tuples=[1 rows], fields=[k, v]) changelogMode=[I]
"""

from __future__ import annotations

from cairn.table.analysis import AggCall, Rex
from cairn.table.changelog import changelog_mode
from cairn.table.plan import (
    JOIN_TYPES,
    Aggregate,
    Calc,
    Correlate,
    Deduplicate,
    IntervalJoin,
    Join,
    Limit,
    LookupJoin,
    MiniBatchAssigner,
    OverAggregate,
    PlanNode,
    PythonCalc,
    Rank,
    SortField,
    StreamScan,
    TableAggregate,
    TemporalJoin,
    TemporalSort,
    TwoInputJoin,
    Union,
    Values,
    WatermarkAssigner,
    WindowAggregate,
    WindowDeduplicate,
    WindowJoin,
    WindowRank,
    WindowTableFunction,
)
from cairn.table.window import GroupWindow

__all__ = ["describe", "explain", "rex_text"]


def describe(node: PlanNode) -> str:
    names = node.columns.names
    if isinstance(node, Values):
        return f"Values(tuples=[{len(node.rows)} rows], fields=[{', '.join(names)}])"
    if isinstance(node, StreamScan):
        if node.spec is not None:
            pushed = node.spec.describe()
            return f"TableSourceScan(table=[{node.name}], {pushed}, fields=[{', '.join(names)}])"
        return f"DataStreamScan(table=[{node.name}], fields=[{', '.join(names)}])"
    if isinstance(node, Calc):
        inner = node.input.columns.names
        parts = []
        if node.projections is not None:
            parts.append(
                "select=["
                + ", ".join(
                    rex_text(p, inner) + ("" if _is_ref(p, inner, n) else f" AS {n}")
                    for p, n in zip(node.projections, names, strict=True)
                )
                + "]"
            )
        if node.condition is not None:
            parts.append(f"where=[{rex_text(node.condition, inner)}]")
        return f"Calc({', '.join(parts)})"
    if isinstance(node, PythonCalc):
        inner = node.input.columns.names
        calls = [
            f"{rex_text(c, inner)} AS {n}"
            for c, n in zip(node.calls, names[len(inner) :], strict=True)
        ]
        return f"PythonCalc(select=[{', '.join([*inner, *calls])}])"
    if isinstance(node, Aggregate):
        inner = node.input.columns.names
        keys = ", ".join(inner[k] for k in node.keys)
        calls = [
            f"{_agg_text(c, inner)} AS {n}"
            for c, n in zip(node.calls, names[len(node.keys) :], strict=True)
        ]
        select = ", ".join([*(names[: len(node.keys)]), *calls])
        head = f"groupBy=[{keys}], " if keys else ""
        return f"GroupAggregate({head}select=[{select}])"
    if isinstance(node, MiniBatchAssigner):
        return f"MiniBatchAssigner(interval=[{node.interval_ms}ms], mode=[{node.mode}])"
    if isinstance(node, Limit):
        return f"Limit(offset=[0], fetch=[{node.count}])"
    if isinstance(node, Deduplicate):
        inner = node.input.columns.names
        return (
            f"Deduplicate(keep=[{'LastRow' if node.keep_last else 'FirstRow'}],"
            f" key=[{', '.join(inner[k] for k in node.keys)}],"
            f" order=[{'PROCTIME' if node.rowtime_index is None else 'ROWTIME'}])"
        )
    if isinstance(node, Rank):
        inner = node.input.columns.names
        order = ", ".join(_sort_text(f, inner) for f in node.order)
        return (
            f"Rank(strategy=[{node.strategy}], rankType=[ROW_NUMBER],"
            f" rankRange=[rankStart={node.start}, rankEnd={node.end}],"
            f" partitionBy=[{', '.join(inner[k] for k in node.keys)}], orderBy=[{order}],"
            f" select=[{', '.join(names)}])"
        )
    if isinstance(node, Union):
        return f"Union(all=[true], union=[{', '.join(names)}])"
    if isinstance(node, WindowAggregate):
        inner = node.input.columns.names
        keys = ", ".join(inner[k] for k in node.keys)
        calls = [
            f"{c.function.upper().replace('_STAR', '')}"
            f"({'*' if c.arg < 0 else inner[c.arg]}) AS {n}"
            for c, n in zip(node.calls, names[len(node.keys) + len(node.properties) :], strict=True)
        ]
        head = f"groupBy=[{keys}], " if keys else ""
        props = ", ".join(node.properties)
        return (
            f"GroupWindowAggregate({head}window=[{node.window.describe()}],"
            f" properties=[{props}], select=[{', '.join([*names[: len(node.keys)], *calls])}])"
        )
    if isinstance(node, OverAggregate):
        inner = node.input.columns.names
        calls = [
            f"{c.function.upper().replace('_STAR', '')}({'*' if c.arg < 0 else inner[c.arg]})"
            for c in node.calls
        ]
        return f"OverAggregate({node.window.describe()}, select=[{', '.join([*inner, *calls])}])"
    if isinstance(node, TableAggregate):
        inner = node.input.columns.names
        keys = ", ".join(inner[k] for k in node.keys)
        args = inner if node.args is None else [inner[a] for a in node.args]
        head = f"groupBy=[{keys}], " if keys else ""
        return (
            f"GroupTableAggregate({head}select=[{node.wrapper.name}({', '.join(args)})"
            f" AS ({', '.join(names[len(node.keys) :])})])"
        )
    if isinstance(node, WatermarkAssigner):
        time = names[node.time_index]
        return (
            f"WatermarkAssigner(rowtime=[{time}], watermark=[{time} - {node.delay_ms}:INTERVAL"
            " SECOND])"
        )
    if isinstance(node, WindowTableFunction | WindowRank | WindowDeduplicate | WindowJoin):
        return _windowed_text(node, names)
    if isinstance(node, TwoInputJoin):
        equal = "=" if not isinstance(node, Join) or node.filter_nulls else "IS NOT DISTINCT FROM"
        pairs = [
            f"{node.left.columns.names[a]} {equal} {node.right.columns.names[b]}"
            for a, b in zip(node.left_keys, node.right_keys, strict=True)
        ]
        if node.condition is not None:
            both = [*node.left.columns.names, *node.right.columns.names]
            pairs.append(rex_text(node.condition, both))
        kind = JOIN_TYPES[node.join_type]
        where = f"where=[{' AND '.join(pairs)}], select=[{', '.join(names)}]"
        if isinstance(node, TemporalJoin):
            times = f"{names[node.left_time]}, {node.right.columns.names[node.right_time]}"
            pairs.append(f"__TEMPORAL_JOIN_CONDITION({times})")
            where = f"where=[{' AND '.join(pairs)}], select=[{', '.join(names)}]"
            return f"TemporalJoin(joinType=[{kind}], {where})"
        if not isinstance(node, IntervalJoin):
            return f"Join(joinType=[{kind}], {where})"
        bounds = (
            f"isRowTime=true, leftLowerBound={node.lower_ms}, leftUpperBound={node.upper_ms},"
            f" leftTimeIndex={node.left_time}, rightTimeIndex={node.right_time}"
        )
        return f"IntervalJoin(joinType=[{kind}], windowBounds=[{bounds}], {where})"
    if isinstance(node, TemporalSort):
        inner = node.input.columns.names
        sorted_by = [f"{inner[node.time_index]} ASC", *(_sort_text(f, inner) for f in node.order)]
        return f"TemporalSort(orderBy=[{', '.join(sorted_by)}])"
    if isinstance(node, LookupJoin):
        inner, table = node.input.columns.names, node.table.columns.names
        lookup = ", ".join(
            f"{table[r]}={inner[k]}" for k, r in zip(node.keys, node.lookup_keys, strict=True)
        )
        where = "" if node.condition is None else f", where=[{rex_text(node.condition, names)}]"
        return (
            f"LookupJoin(table=[default_catalog.default_database.{node.table.name}],"
            f" joinType=[{JOIN_TYPES[node.join_type]}], lookup=[{lookup}]{where},"
            f" select=[{', '.join(names)}])"
        )
    if isinstance(node, Correlate):
        inner = node.input.columns.names
        args = inner if node.args is None else [rex_text(a, inner) for a in node.args]
        join = "LEFT" if node.outer else "INNER"
        return (
            f"Correlate(invocation=[{node.wrapper.name}({', '.join(args)})],"
            f" select=[{', '.join(names)}], joinType=[{join}])"
        )
    return type(node).__name__


def _duration(ms: int) -> str:
    """An interval as Flink's plans print it: ``10 min``, ``5 s``, ``1500 ms``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def window_text(window: GroupWindow, columns: str) -> str:
    """A window TVF's window as Flink prints it: ``TUMBLE(time_col=[ts], size=[5 s])``
    (``columns``: what it is on, ``time_col=[ts]`` or ``win_start=[...], win_end=[...]``)."""
    kind = {"tumble": "TUMBLE", "slide": "HOP", "cumulate": "CUMULATE", "session": "SESSION"}
    parts = [columns]
    if window.kind == "slide":
        parts += [f"size=[{_duration(window.size_ms)}]", f"slide=[{_duration(window.slide_ms)}]"]
    elif window.kind == "cumulate":
        parts += [f"max_size=[{_duration(window.size_ms)}]", f"step=[{_duration(window.slide_ms)}]"]
    elif window.kind == "session":
        parts.append(f"gap=[{_duration(window.gap_ms)}]")
    else:
        parts.append(f"size=[{_duration(window.size_ms)}]")
    if window.offset_ms:
        parts.append(f"offset=[{_duration(window.offset_ms)}]")
    return f"{kind[window.kind]}({', '.join(parts)})"


def _windowed_text(node: PlanNode, names: list[str]) -> str:
    """A window TVF, window Top-N, deduplication or join."""
    if isinstance(node, WindowTableFunction):
        inner = node.input.columns.names
        on = f"time_col=[{inner[node.time_index]}]"
        if node.partition_keys:
            on = f"partition_keys=[{', '.join(inner[k] for k in node.partition_keys)}], {on}"
        return f"WindowTableFunction(window=[{window_text(node.window, on)}])"
    if isinstance(node, WindowJoin):
        kind = JOIN_TYPES[node.join_type]
        lnames, rnames = node.left.columns.names, node.right.columns.names
        sides = [
            window_text(node.window, f"win_start=[{n[w[0]]}], win_end=[{n[w[1]]}]")
            for n, w in ((lnames, node.left_window), (rnames, node.right_window))
        ]
        pairs = [
            f"{lnames[a]} = {rnames[b]}"
            for a, b in zip(node.left_keys, node.right_keys, strict=True)
        ]
        if node.condition is not None:
            pairs.append(rex_text(node.condition, names))
        return (
            f"WindowJoin(leftWindow=[{sides[0]}], rightWindow=[{sides[1]}],"
            f" joinType=[{kind}], where=[{' AND '.join(pairs)}], select=[{', '.join(names)}])"
        )
    assert isinstance(node, WindowRank | WindowDeduplicate)
    inner = node.input.columns.names
    on = f"win_start=[{inner[node.window_start]}], win_end=[{inner[node.window_end]}]"
    window = f"window=[{window_text(node.window, on)}]"
    keys = ", ".join(inner[k] for k in node.keys)
    if isinstance(node, WindowDeduplicate):
        keep = "LastRow" if node.keep_last else "FirstRow"
        return (
            f"WindowDeduplicate({window}, keep=[{keep}], partitionKeys=[{keys}],"
            f" orderKey=[{inner[node.time_index]}], order=[ROWTIME])"
        )
    order = ", ".join(_sort_text(f, inner) for f in node.order)
    return (
        f"WindowRank({window}, rankType=[ROW_NUMBER], rankRange=[rankStart={node.start},"
        f" rankEnd={node.end}], partitionBy=[{keys}], orderBy=[{order}],"
        f" select=[{', '.join(names)}])"
    )


def _sort_text(f: SortField, names: list[str]) -> str:
    """``v DESC`` (nulls where Flink puts them by default: first ascending, last descending)
    or ``v DESC NULLS FIRST``."""
    text = f"{names[f.index]} {'ASC' if f.ascending else 'DESC'}"
    if f.nulls_first != f.ascending:
        text += f" NULLS {'FIRST' if f.nulls_first else 'LAST'}"
    return text


def _is_ref(rex: Rex, names: list[str], name: str) -> bool:
    return rex.kind == "input" and names[rex.index] == name


def rex_text(rex: Rex, names: list[str]) -> str:
    if rex.kind == "input":
        return names[rex.index]
    if rex.kind == "literal":
        return repr(rex.value) if isinstance(rex.value, str) else str(rex.value)
    if rex.kind == "cast":
        fn = "TRY_CAST" if rex.op == "try" else "CAST"
        return f"{fn}({rex_text(rex.operands[0], names)} AS {rex.data_type})"
    op = rex.value.name if rex.op == "udf" else rex.op
    return f"{op}({', '.join(rex_text(o, names) for o in rex.operands)})"


def explain(node: PlanNode) -> str:
    """The plan as an indented tree, each node with its changelog mode."""
    lines: list[str] = []

    def walk(n: PlanNode, prefix: str, child_prefix: str) -> None:
        lines.append(f"{prefix}{describe(n)} changelogMode=[{changelog_mode(n).value}]")
        kids = n.inputs
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            walk(kid, child_prefix + "+- ", child_prefix + ("   " if last else ":  "))

    walk(node, "", "")
    return "\n".join(lines)


def _agg_text(call: AggCall, inner: list[str]) -> str:
    """``COUNT(DISTINCT v) FILTER $e0``, as Flink prints an aggregate call."""
    name = call.function.upper().replace("_STAR", "")
    if name == "COUNT_DISTINCT":
        name, distinct = "COUNT", True
    else:
        distinct = call.distinct
    arg = "*" if call.arg < 0 else inner[call.arg]
    text = f"{name}({'DISTINCT ' if distinct else ''}{arg})"
    return text if call.filter_arg < 0 else f"{text} FILTER {inner[call.filter_arg]}"
