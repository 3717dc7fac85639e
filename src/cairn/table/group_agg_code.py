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

from cairn.table.aggregates import Accumulator, accumulator_for
from cairn.table.analysis import AggCall

__all__ = ["GroupAggCode", "group_agg_source"]

#: ``group_agg(records, stamps, set_key, value, update, clear, out, out_stamps)``: appends the
#: outputs of ``records`` (and, per output, its input's timestamp from ``stamps``) to ``out``.
GroupAggBatch = Callable[..., None]


def _key_source(keys: Sequence[int]) -> str:
    """The group key's tuple, as ``operators.fields_key`` builds it."""
    return "(" + ", ".join(f"row[{k}]" for k in keys) + ",)" if keys else "()"


def group_agg_source(keys: Sequence[int], calls: Sequence[AggCall]) -> str:
    """The source of ``group_agg`` for a ``GROUP BY keys`` computing ``calls``."""
    aggs = [accumulator_for(c) for c in calls]
    values = [
        "row" if a.takes_row else "None" if c.arg < 0 else f"row[{c.arg}]"
        for a, c in zip(aggs, calls, strict=True)
    ]
    creates = ", ".join(a.inline_create(f"_agg{i}") for i, a in enumerate(aggs))
    results = "".join(f"{_result(a, i)}, " for i, a in enumerate(aggs))
    lines = [
        "def group_agg(records, stamps, set_key, value, update, clear, out, out_stamps):",
        "    emit = out.append",
        "    stamp = out_stamps.append",
        "    for (kind, row), t in zip(records, stamps):",
        f"        key = {_key_source(keys)}",
        "        set_key(key)",
        "        state = value()",
        "        adding = kind == 0 or kind == 2",
        "        if state is None:",
        "            if not adding:",
        "                continue  # a retraction of a group never seen (as Flink: ignored)",
        f"            accs = [{creates}]",
        "            state = [0, accs]",
        "            before = None",
        "        else:",
        "            accs = state[1]",
        f"            before = ({results})",
        "        if adding:",
        *(
            f"            {a.inline_add(f'accs[{i}]', v, f'_agg{i}')}"
            for i, (a, v) in enumerate(zip(aggs, values, strict=True))
        ),
        "            count = state[0] + 1",
        "        else:",
        *(
            f"            {a.inline_retract(f'accs[{i}]', v, f'_agg{i}')}"
            for i, (a, v) in enumerate(zip(aggs, values, strict=True))
        ),
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


def _result(agg: Accumulator, i: int) -> str:
    return agg.inline_result(f"accs[{i}]", f"_agg{i}")


class GroupAggCode:
    """``group_agg`` compiled once per subtask, with the accumulator objects it calls."""

    def __init__(self, keys: Sequence[int], calls: Sequence[AggCall]) -> None:
        namespace: dict[str, Any] = {f"_agg{i}": accumulator_for(c) for i, c in enumerate(calls)}
        source = group_agg_source(keys, calls)
        exec(compile(source, "<cairn-group-agg>", "exec"), namespace)
        self.function: GroupAggBatch = namespace["group_agg"]
