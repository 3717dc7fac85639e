"""Window TVFs in full on the in-process executor: ``TUMBLE``/``HOP``/``CUMULATE``/``SESSION``
as tables, window aggregation over all four, window Top-N, window deduplication and window
joins — each job's rows checked against an expectation computed here in plain Python from the
same events; and the errors of misuse, at their SQL position."""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import DataTypes, Schema, StreamTableEnvironment
from cairn.table.sql.errors import SqlValidationError

# (ms, key, value): NULL keys among them, out of order within the watermark's delay
EVENTS = [
    (1000, "a", 4),
    (2500, "b", 7),
    (1500, "a", 9),
    (4200, None, 1),
    (6100, "a", 2),
    (5900, "b", 8),
    (9000, "b", 3),
    (12500, "a", 5),
    (11000, None, 6),
    (19000, "b", 1),
]
OTHER = [(1200, "a", "x"), (6500, "b", "y"), (4100, None, "z"), (7000, "c", "w")]


def _env() -> StreamTableEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    for name, rows, kind in (("t", EVENTS, DataTypes.INT()), ("r", OTHER, DataTypes.STRING())):
        ds = env.from_collection(
            [(Instant.of_epoch_milli(ms), k, v) for ms, k, v in rows],
            type_info=Types.ROW(
                [Types.INSTANT(), Types.STRING(), Types.INT() if name == "t" else Types.STRING()]
            ),
        )
        table = t_env.from_data_stream(
            ds,
            Schema.new_builder()
            .column_by_expression("ts", "CAST(f0 AS TIMESTAMP(3))")
            .column("f1", DataTypes.STRING())
            .column("f2", kind)
            .watermark("ts", "ts - INTERVAL '5' SECOND")
            .build(),
        ).alias("ts", "k", "v")
        t_env.create_temporary_view(name, table)
    return t_env


def _t(ms: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)


def _rows(t_env: StreamTableEnvironment, sql: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in t_env.sql_query(sql).execute().collect()), key=repr)


def _tumble(ms: int, size: int, offset: int = 0) -> list[tuple[int, int]]:
    start = ms - (ms - offset) % size
    return [(start, start + size)]


def _hop(ms: int, slide: int, size: int) -> list[tuple[int, int]]:
    last = ms - ms % slide
    return [(s, s + size) for s in range(last, ms - size, -slide)]


def _cumulate(ms: int, step: int, size: int) -> list[tuple[int, int]]:
    start = ms - ms % size
    return [(start, end) for end in range(start + step, start + size + 1, step) if end > ms]


@pytest.mark.parametrize(
    ("call", "assign"),
    [
        ("TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)", lambda ms: _tumble(ms, 5000)),
        (
            "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '2' SECOND)",
            lambda ms: _tumble(ms, 5000, 2000),
        ),
        (
            "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
            lambda ms: _hop(ms, 2000, 6000),
        ),
        (
            "CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
            lambda ms: _cumulate(ms, 2000, 6000),
        ),
    ],
)
def test_a_window_tvf_as_a_table_gives_each_row_once_per_window(call: str, assign: Any) -> None:
    t_env = _env()
    got = _rows(t_env, f"SELECT * FROM TABLE({call}) WHERE v > 1")
    expected = [
        (_t(ms), k, v, _t(s), _t(e), _t(e - 1))
        for ms, k, v in EVENTS
        if v > 1
        for s, e in assign(ms)
    ]
    assert got == sorted(expected, key=repr)
    names = t_env.sql_query(f"SELECT * FROM TABLE({call})").get_schema().names
    assert names == ["ts", "k", "v", "window_start", "window_end", "window_time"]


def test_cumulate_and_an_offset_tumble_aggregate_per_window() -> None:
    t_env = _env()
    got = _rows(
        t_env,
        "SELECT window_start, window_end, COUNT(*), SUM(v) FROM TABLE(CUMULATE(TABLE t,"
        " DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))"
        " GROUP BY window_start, window_end",
    )
    sums: dict[tuple[int, int], list[int]] = defaultdict(list)
    for ms, _, v in EVENTS:
        for w in _cumulate(ms, 5000, 10000):
            sums[w].append(v)
    assert got == sorted(
        [(_t(s), _t(e), len(vs), sum(vs)) for (s, e), vs in sums.items()], key=repr
    )
    offset = _rows(
        t_env,
        "SELECT k, window_start, SUM(v) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
        " INTERVAL '5' SECOND, INTERVAL '1' SECOND)) GROUP BY window_start, window_end, k",
    )
    by: dict[tuple[Any, int], int] = defaultdict(int)
    for ms, k, v in EVENTS:
        by[k, _tumble(ms, 5000, 1000)[0][0]] += v
    assert offset == sorted([(k, _t(s), v) for (k, s), v in by.items()], key=repr)


def _sessions(rows: list[tuple[int, Any, Any]], gap: int) -> list[tuple[Any, int, int, list[Any]]]:
    """Per key, the sessions of its rows: (key, start, end, rows)."""
    out = []
    by_key: dict[Any, list[tuple[int, Any, Any]]] = defaultdict(list)
    for row in rows:
        by_key[row[1]].append(row)
    for key, key_rows in by_key.items():
        current: list[Any] = []
        for row in sorted(key_rows):
            if current and row[0] > current[-1][0] + gap:
                out.append((key, current[0][0], current[-1][0] + gap, current))
                current = []
            current.append(row)
        out.append((key, current[0][0], current[-1][0] + gap, current))
    return out


def test_session_windows_partitioned_by_key_as_a_table_and_aggregated() -> None:
    t_env = _env()
    call = "SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '2' SECOND)"
    sessions = _sessions(EVENTS, 2000)
    got = _rows(t_env, f"SELECT k, v, window_start, window_end FROM TABLE({call})")
    assert got == sorted(
        [(k, r[2], _t(s), _t(e)) for k, s, e, rows in sessions for r in rows], key=repr
    )
    aggregated = _rows(
        t_env,
        f"SELECT k, window_start, window_end, SUM(v) FROM TABLE({call})"
        " GROUP BY k, window_start, window_end",
    )
    assert aggregated == sorted(
        [(k, _t(s), _t(e), sum(r[2] for r in rows)) for k, s, e, rows in sessions], key=repr
    )


def test_window_top_n_over_a_window_aggregate_and_over_a_tvf() -> None:
    t_env = _env()
    got = _rows(
        t_env,
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end"
        " ORDER BY total DESC) AS rn FROM (SELECT window_start, window_end, k, SUM(v) AS total"
        " FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
        " GROUP BY window_start, window_end, k)) WHERE rn <= 2",
    )
    totals: dict[tuple[int, Any], int] = defaultdict(int)
    for ms, k, v in EVENTS:
        totals[_tumble(ms, 10000)[0][0], k] += v
    expected = []
    for start in {s for s, _ in totals}:
        ranked = sorted(((t, k) for (s, k), t in totals.items() if s == start), reverse=True)
        for rn, (total, k) in enumerate(ranked[:2], start=1):
            expected.append((_t(start), _t(start + 10000), k, total, rn))
    assert got == sorted(expected, key=repr)
    direct = _rows(
        t_env,
        "SELECT k, v, window_start FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
        " window_start, window_end, k ORDER BY v ASC) AS rn FROM TABLE(TUMBLE(TABLE t,"
        " DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn = 1",
    )
    least: dict[tuple[int, Any], int] = {}
    for ms, k, v in EVENTS:
        w = _tumble(ms, 10000)[0][0]
        least[w, k] = min(v, least.get((w, k), v))
    assert direct == sorted([(k, v, _t(w)) for (w, k), v in least.items()], key=repr)
    plan = t_env.sql_query(
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end"
        " ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
        " INTERVAL '10' SECOND))) WHERE rn <= 3"
    ).explain()
    assert "WindowRank(window=[TUMBLE(win_start=[window_start], win_end=[window_end]" in plan
    assert "WindowTableFunction(window=[TUMBLE(time_col=[ts], size=[10 s])])" in plan


@pytest.mark.parametrize("direction", ["ASC", "DESC"])
def test_window_deduplication_keeps_the_first_or_last_row_per_window(direction: str) -> None:
    t_env = _env()
    got = _rows(
        t_env,
        "SELECT k, v, window_end FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
        f" window_start, window_end, k ORDER BY ts {direction}) AS rn FROM TABLE(HOP(TABLE t,"
        " DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))) WHERE rn <= 1",
    )
    kept: dict[tuple[int, Any], tuple[int, int]] = {}
    for ms, k, v in EVENTS:
        for _, e in _hop(ms, 5000, 10000):
            before = kept.get((e, k))
            later = before is None or (ms > before[0] if direction == "DESC" else ms < before[0])
            if later:
                kept[e, k] = (ms, v)
    assert got == sorted([(k, v, _t(e)) for (e, k), (_, v) in kept.items()], key=repr)
    plan = t_env.sql_query(
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k"
        f" ORDER BY ts {direction}) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
        " INTERVAL '10' SECOND))) WHERE rn <= 1"
    ).explain()
    keep = "LastRow" if direction == "DESC" else "FirstRow"
    assert "WindowDeduplicate(window=[TUMBLE(win_start=[window_start]" in plan
    assert f"keep=[{keep}], partitionKeys=[k], orderKey=[ts], order=[ROWTIME])" in plan


@pytest.mark.parametrize("side", ["", "LEFT", "RIGHT", "FULL"])
def test_window_joins_match_rows_of_the_same_window_and_key(side: str) -> None:
    t_env = _env()
    got = _rows(
        t_env,
        "SELECT L.k, L.v, R.k, R.v, L.window_start FROM"
        " (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))) L"
        f" {side} JOIN"
        " (SELECT * FROM TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' SECOND))) R"
        " ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k",
    )
    left = [(k, v, _tumble(ms, 5000)[0][0]) for ms, k, v in EVENTS]
    right = [(k, v, _tumble(ms, 5000)[0][0]) for ms, k, v in OTHER]
    expected = []
    for lk, lv, lw in left:
        matches = [(rk, rv) for rk, rv, rw in right if rk == lk and lk is not None and rw == lw]
        expected += [(lk, lv, rk, rv, _t(lw)) for rk, rv in matches]
        if not matches and side in ("LEFT", "FULL"):
            expected.append((lk, lv, None, None, _t(lw)))
    if side in ("RIGHT", "FULL"):
        for rk, rv, rw in right:
            if not any(lk == rk and rk is not None and lw == rw for lk, _, lw in left):
                expected.append((None, None, rk, rv, None))
    assert got == sorted(expected, key=repr)
    assert any(r[0] is None for r in expected) or side in ("", "RIGHT"), "NULL keys were in"


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY v)"
            " AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)))"
            " WHERE rn <= 2",
            "partitioned by both window_start and window_end",
            1,
            26,
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, INTERVAL '5' SECOND))",
            "TUMBLE takes (TABLE t, DESCRIPTOR(ts), size[, offset])",
            1,
            21,
        ),
        (
            "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(k), INTERVAL '1' SECOND,"
            " INTERVAL '5' SECOND))",
            "requires the timecol to be a time attribute",
            1,
            21,
        ),
        (
            "SELECT * FROM (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
            " INTERVAL '5' SECOND))) L JOIN (SELECT * FROM TABLE(TUMBLE(TABLE r,"
            " DESCRIPTOR(ts), INTERVAL '9' SECOND))) R ON L.window_start = R.window_start"
            " AND L.window_end = R.window_end",
            "A window join needs both inputs windowed alike",
            1,
            179,
        ),
    ],
)
def test_window_tvf_misuse_is_refused_at_its_place(
    sql: str, message: str, line: int, column: int
) -> None:
    t_env = _env()
    with pytest.raises(SqlValidationError) as caught:
        t_env.sql_query(sql)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)
