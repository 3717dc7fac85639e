"""The window Top-N and deduplication operator (``WindowRankFunction``) driven record by
record: a window fires when the watermark passes its end, late rows are dropped, and open
windows survive a snapshot restored at another parallelism (their keys' groups rescaled)."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.events import MAX_WATERMARK
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.state.key_groups import assign_to_key_group, subtask_for_key_group
from cairn.table.operators import fields_key
from cairn.table.plan import SortField
from cairn.table.timestamps import timestamp_of_millis
from cairn.table.window_rank import WindowRankFunction

from ._operator_harness import OperatorHarness, snapshot_operator

V_DESC = (SortField(1, ascending=False, nulls_first=False),)
KEY = (0, 2)  # partition key and window_end, as the plan keys a window Top-N


def _row(key: Any, value: int, end_ms: int) -> tuple[int, tuple[Any, ...]]:
    return (0, (key, value, timestamp_of_millis(end_ms)))


def _harness(backend: str = "heap", parallelism: int = 1, index: int = 0, **kw: Any) -> Any:
    function = WindowRankFunction(2, V_DESC, 1, 2, True)
    return OperatorHarness(
        function,
        parallelism=parallelism,
        index=index,
        key_selector=fields_key(KEY),
        backend_kind=backend,
        **kw,
    )


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_window_top_n_fires_at_its_end_and_drops_late_rows(backend: str) -> None:
    h = _harness(backend)
    h.op.process_batch([_row("a", 1, 5000), _row("a", 7, 5000), _row("a", 3, 5000)])
    h.op.process_batch([_row(None, 4, 5000), _row("a", 9, 10000)])
    h.op.process_watermark(4998)
    assert h.records() == [], "[.., 5000) fires at 4999, not before"
    h.op.process_watermark(4999)
    fired = sorted((r for r, _ in h.records()), key=repr)
    end = timestamp_of_millis(5000)
    assert fired == sorted(
        [(0, ("a", 3, end, 2)), (0, ("a", 7, end, 1)), (0, (None, 4, end, 1))], key=repr
    )
    h.op.process_batch([_row("a", 100, 5000)])  # late: its window fired
    h.op.process_watermark(MAX_WATERMARK)
    assert [r for r, _ in h.records()][3:] == [(0, ("a", 9, timestamp_of_millis(10000), 1))]


def test_open_windows_restore_at_another_parallelism() -> None:
    rows = [_row(k, v, 5000 * (1 + v % 2)) for v, k in enumerate("abcdefgh" * 3)]
    whole = _harness()
    whole.op.process_batch(rows)
    whole.op.process_watermark(MAX_WATERMARK)
    expected = sorted(r for r, _ in whole.records())
    before = _harness()
    before.op.process_batch(rows[:10])
    state, files = snapshot_operator(before.op)
    restore = OperatorRestore(1, {SubtaskIndex(0): state}, files)
    subtasks = [_harness(parallelism=2, index=i, restore=restore) for i in range(2)]
    for record in rows[10:]:
        key = tuple(record[1][i] for i in KEY)
        owner = subtask_for_key_group(128, 2, assign_to_key_group(key, 128))
        subtasks[owner].op.process_batch([record])
    for s in subtasks:
        s.op.process_watermark(MAX_WATERMARK)
    got = sorted(r for s in subtasks for r, _ in s.records())
    assert got == expected
    assert len(expected) == 8 * 2 and {len(s.records()) for s in subtasks} != {0}
