"""Generated code of a streaming group aggregate: one function per operator runs a whole batch.

Invariant: the generated ``group_agg`` does for each record, in order, exactly what
``GroupAggFunction.process_element`` does (Flink's ``GroupAggFunction``): read the group's
``[count, accumulators]`` from keyed state, add (``+I``/``+U``) or retract (``-U``/``-D``) the
row, write the state back (or clear it when the group's last row was retracted) and emit what
changed — ``+I`` for a new group, ``-U``/``+U`` for a changed result, ``-D`` for a group gone,
nothing when the result did not change; each output carries its input's timestamp. The state
layout is the same, so a savepoint of either path restores into the other. The built-in
``COUNT``/``SUM`` accumulators are inlined (``Accumulator.inline``); every other one is
called through its object, ``_agg<i>``.

>>> from cairn.table.analysis import AggCall
>>> from cairn.table.types import DataTypes
>>> calls = [AggCall("count_star", -1, DataTypes.BIGINT(False))]
>>> print(group_agg_source((0,), calls).splitlines()[4])  # the key, inline
        key = (row[0],)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cairn.table.aggregates import Accumulator, accumulator_for, unfiltered
from cairn.table.analysis import AggCall

__all__ = [
    "GroupAggCode",
    "MiniBatchAggCode",
    "accumulate_lines",
    "accumulator_namespace",
    "creates_source",
    "group_agg_source",
    "key_source",
    "mini_batch_source",
]

#: ``group_agg(records, stamps, set_key, value, update, clear, out, out_stamps)``: appends the
#: outputs of ``records`` (and, per output, its input's timestamp from ``stamps``) to ``out``.
GroupAggBatch = Callable[..., None]


def key_source(keys: Sequence[int]) -> str:
    """The group key's tuple from ``row``, as ``operators.fields_key`` builds it."""
    return "(" + ", ".join(f"row[{k}]" for k in keys) + ",)" if keys else "()"


def accumulate_lines(calls: Sequence[AggCall], accs: str, adding: bool) -> list[str]:
    """Statements adding (or retracting) ``row`` to the accumulators in the list ``accs``;
    the accumulator of call ``i`` is ``_agg<i>`` in the generated code's namespace. A call's
    ``FILTER`` is an ``if`` around its statement (only a TRUE condition passes)."""
    lines: list[str] = []
    for i, call in enumerate(calls):
        agg = _code_accumulator(call)
        value = "row" if agg.takes_row else "None" if call.arg < 0 else f"row[{call.arg}]"
        inline = agg.inline_add if adding else agg.inline_retract
        statement = inline(f"{accs}[{i}]", value, f"_agg{i}")
        if call.filter_arg >= 0:
            lines.extend((f"if row[{call.filter_arg}] is True:", f"    {statement}"))
        else:
            lines.append(statement)
    return lines


def _code_accumulator(call: AggCall) -> Accumulator:
    """The accumulator generated code calls: a call's ``FILTER`` is tested in the code."""
    return accumulator_for(unfiltered(call))


def creates_source(calls: Sequence[AggCall]) -> str:
    """The list of fresh accumulators of ``calls``."""
    aggs = [_code_accumulator(c) for c in calls]
    return "[" + ", ".join(a.inline_create(f"_agg{i}") for i, a in enumerate(aggs)) + "]"


def accumulator_namespace(calls: Sequence[AggCall]) -> dict[str, Any]:
    """The objects generated code calls: ``_agg<i>``, the accumulator of call ``i``."""
    return {f"_agg{i}": _code_accumulator(c) for i, c in enumerate(calls)}


def group_agg_source(keys: Sequence[int], calls: Sequence[AggCall]) -> str:
    """The source of ``group_agg`` for a ``GROUP BY keys`` computing ``calls``."""
    aggs = [_code_accumulator(c) for c in calls]
    results = "".join(f"{_result(a, i)}, " for i, a in enumerate(aggs))
    lines = [
        "def group_agg(records, stamps, set_key, value, update, clear, out, out_stamps):",
        "    emit = out.append",
        "    stamp = out_stamps.append",
        "    for (kind, row), t in zip(records, stamps):",
        f"        key = {key_source(keys)}",
        "        set_key(key)",
        "        state = value()",
        "        adding = kind == 0 or kind == 2",
        "        if state is None:",
        "            if not adding:",
        "                continue  # a retraction of a group never seen (as Flink: ignored)",
        f"            accs = {creates_source(calls)}",
        "            state = [0, accs]",
        "            before = None",
        "        else:",
        "            accs = state[1]",
        f"            before = ({results})",
        "        if adding:",
        *(f"            {line}" for line in accumulate_lines(calls, "accs", adding=True)),
        "            count = state[0] + 1",
        "        else:",
        *(f"            {line}" for line in accumulate_lines(calls, "accs", adding=False)),
        "            count = state[0] - 1",
        "        if count <= 0:",
        "            clear()",
        "            if before is not None:",
        "                emit((3, key + before))",
        "                stamp(t)",
        "            continue",
        "        state[0] = count",
        "        update(state)",
        f"        after = ({results})",
        "        if before is None:",
        "            emit((0, key + after))",
        "            stamp(t)",
        "        elif after != before:",
        "            emit((1, key + before))",
        "            emit((2, key + after))",
        "            stamp(t)",
        "            stamp(t)",
    ]
    return "\n".join(lines)


def mini_batch_source(keys: Sequence[int], calls: Sequence[AggCall]) -> str:
    """The sources of ``buffer`` and ``fold`` of a mini-batch ``GROUP BY keys`` (Flink's
    ``MiniBatchGroupAggFunction``).

    ``buffer(records, stamps, bundle, last)`` appends each record to its key's list in
    ``bundle`` (and, when ``stamps`` is not None, puts its timestamp in ``last[key]``).
    ``fold(bundle, last, set_key, value, update, clear, out, out_stamps)`` folds each key's
    records into its state with one read and at most one write, in arrival order with the
    per-record rules (a retraction of a group that has no rows is ignored; a group whose
    rows were all retracted starts again from fresh accumulators), then emits one change per
    key: ``+I`` for a new group, ``-U``/``+U`` for a changed result, ``-D`` for a group gone,
    nothing otherwise; each carries the key's last timestamp (``last.get(key)``).
    """
    aggs = [_code_accumulator(c) for c in calls]
    results = "".join(f"{_result(a, i)}, " for i, a in enumerate(aggs))
    key = key_source(keys)
    lines = [
        "def buffer(records, stamps, bundle, last):",
        "    get = bundle.get",
        "    if stamps is None:",
        "        for record in records:",
        "            row = record[1]",
        f"            key = {key}",
        "            listed = get(key)",
        "            if listed is None:",
        "                bundle[key] = [record]",
        "            else:",
        "                listed.append(record)",
        "        return",
        "    for record, t in zip(records, stamps):",
        "        row = record[1]",
        f"        key = {key}",
        "        listed = get(key)",
        "        if listed is None:",
        "            bundle[key] = [record]",
        "        else:",
        "            listed.append(record)",
        "        last[key] = t",
        "",
        "def fold(bundle, last, set_key, value, update, clear, out, out_stamps):",
        "    emit = out.append",
        "    stamp = out_stamps.append",
        "    last_of = last.get",
        "    for key, records in bundle.items():",
        "        set_key(key)",
        "        state = value()",
        "        if state is None:",
        "            count = 0",
        "            accs = None",
        "            before = None",
        "        else:",
        "            count = state[0]",
        "            accs = state[1]",
        f"            before = ({results})",
        "        for kind, row in records:",
        "            if kind == 0 or kind == 2:",
        "                if count <= 0:",
        f"                    accs = {creates_source(calls)}",
        "                    count = 0",
        *(f"                {line}" for line in accumulate_lines(calls, "accs", adding=True)),
        "                count += 1",
        "            elif count > 0:",
        *(f"                {line}" for line in accumulate_lines(calls, "accs", adding=False)),
        "                count -= 1",
        "        if count <= 0:",
        "            if state is not None:",
        "                clear()",
        "                emit((3, key + before))",
        "                stamp(last_of(key))",
        "            continue",
        "        if state is None:",
        "            update([count, accs])",
        "        else:",
        "            state[0] = count",
        "            state[1] = accs",
        "            update(state)",
        f"        after = ({results})",
        "        if before is None:",
        "            emit((0, key + after))",
        "            stamp(last_of(key))",
        "        elif after != before:",
        "            t = last_of(key)",
        "            emit((1, key + before))",
        "            emit((2, key + after))",
        "            stamp(t)",
        "            stamp(t)",
    ]
    return "\n".join(lines)


def _result(agg: Accumulator, i: int) -> str:
    return agg.inline_result(f"accs[{i}]", f"_agg{i}")


class MiniBatchAggCode:
    """``buffer`` and ``fold`` (``mini_batch_source``) compiled once per subtask."""

    def __init__(self, keys: Sequence[int], calls: Sequence[AggCall]) -> None:
        namespace = accumulator_namespace(calls)
        source = mini_batch_source(keys, calls)
        exec(compile(source, "<cairn-mini-batch-agg>", "exec"), namespace)
        self.buffer: Callable[..., None] = namespace["buffer"]
        self.fold: Callable[..., None] = namespace["fold"]


class GroupAggCode:
    """``group_agg`` compiled once per subtask, with the accumulator objects it calls."""

    def __init__(self, keys: Sequence[int], calls: Sequence[AggCall]) -> None:
        namespace = accumulator_namespace(calls)
        source = group_agg_source(keys, calls)
        exec(compile(source, "<cairn-group-agg>", "exec"), namespace)
        self.function: GroupAggBatch = namespace["group_agg"]
