"""Aggregation breadth on the in-process executor: ``AGG(DISTINCT ...)``, ``FILTER (WHERE ...)``,
``GROUPING SETS``/``ROLLUP``/``CUBE``, ``STDDEV``/``VAR``, ``FIRST_VALUE``/``LAST_VALUE``/
``LISTAGG``, with retraction.

Every expectation is computed here in plain Python from the rows (each group's result from
scratch after each row), never by Cairn's accumulators: an insert-only input's changelog is
compared exactly (``+I`` for a new group, ``-U``/``+U`` for a changed result, nothing for an
unchanged one, as Flink's ``GroupAggFunction``), an updating input's through the view it
leaves, each retraction checked to remove a row that is there.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from cairn.common import Types, WatermarkStrategy
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.table import (
    DataTypes,
    EnvironmentSettings,
    Schema,
    StreamTableEnvironment,
    Table,
    TableEnvironment,
)
from cairn.table.expressions import col
from cairn.table.sql.errors import SqlValidationError

Row = tuple[Any, ...]


def _t_env(parallelism: int = 1) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    return t_env


def _rows(seed: int, n: int) -> list[Row]:
    """``(id, k, v, p)``: a key of three (and NULL), a small value (and NULL) that repeats,
    a price."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.choice(["a", "b", "c", None])
        v = rnd.choice([None, *range(6)])
        out.append((i, k, v, rnd.randrange(0, 20_000)))
    return out


def _table(t_env: TableEnvironment, rows: list[Row]) -> Table:
    t = t_env.from_elements(
        rows,
        DataTypes.ROW(
            [
                DataTypes.FIELD("id", DataTypes.BIGINT()),
                DataTypes.FIELD("k", DataTypes.STRING()),
                DataTypes.FIELD("v", DataTypes.INT()),
                DataTypes.FIELD("p", DataTypes.BIGINT()),
            ]
        ),
    )
    t_env.create_temporary_view("t", t)
    return t


def _changes(table: Table) -> list[tuple[str, Row]]:
    return [(r.get_row_kind().short_string(), tuple(r)) for r in table.execute().collect()]


def _expected_changelog(
    rows: Sequence[Row], key: Callable[[Row], Any], result: Callable[[list[Row]], Row]
) -> list[tuple[str, Row]]:
    """Flink's group aggregate changelog of an insert-only input, each result recomputed."""
    groups: dict[Any, list[Row]] = {}
    out: list[tuple[str, Row]] = []
    for row in rows:
        k = key(row)
        before = result(groups[k]) if k in groups else None
        groups.setdefault(k, []).append(row)
        after = result(groups[k])
        if before is None:
            out.append(("+I", after))
        elif after != before:
            out += [("-U", before), ("+U", after)]
    return out


def _view(changes: list[tuple[str, Row]]) -> Counter[Row]:
    """The rows a changelog leaves; every retraction must remove a row that is there."""
    view: Counter[Row] = Counter()
    for kind, row in changes:
        if kind in ("+I", "+U"):
            view[row] += 1
        else:
            assert view[row] > 0, f"{kind} of a row not there: {row}"
            view[row] -= 1
    return +view


def _distinct(values: Any) -> list[Any]:
    return sorted({v for v in values if v is not None})


# ---- DISTINCT and FILTER -------------------------------------------------------------------


def test_distinct_and_filter_aggregates_give_flinks_exact_changelog() -> None:
    rows = _rows(1, 120)
    t_env = _t_env()
    _table(t_env, rows)
    result = t_env.sql_query(
        "SELECT k, COUNT(DISTINCT v), SUM(DISTINCT v), AVG(DISTINCT v), MAX(DISTINCT v),"
        " COUNT(*) FILTER (WHERE p < 10000),"
        " COUNT(DISTINCT v) FILTER (WHERE p < 10000),"
        " SUM(v) FILTER (WHERE v > 2 AND p >= 10000),"
        " MIN(p) FILTER (WHERE v IS NULL)"
        " FROM t GROUP BY k"
    )

    def aggregates(group: list[Row]) -> Row:
        vs = _distinct(r[2] for r in group)
        cheap = [r for r in group if r[3] < 10000]
        big = [r[2] for r in group if r[2] is not None and r[2] > 2 and r[3] >= 10000]
        no_v = [r[3] for r in group if r[2] is None]
        return (
            group[0][1],
            len(vs),
            sum(vs) if vs else None,
            int(sum(vs) / len(vs)) if vs else None,  # INT: truncated, as Java divides
            max(vs) if vs else None,
            len(cheap),
            len(_distinct(r[2] for r in cheap)),
            sum(big) if big else None,
            min(no_v) if no_v else None,
        )

    assert _changes(result) == _expected_changelog(rows, lambda r: r[1], aggregates)


def test_the_dsl_distinct_is_sqls() -> None:
    rows = _rows(2, 60)
    t_env = _t_env()
    t = _table(t_env, rows)
    dsl = t.group_by(col("k")).select(
        col("k"), col("v").sum.distinct.alias("s"), col("v").count.distinct.alias("c")
    )
    sql = t_env.sql_query(
        "SELECT k, SUM(DISTINCT v) AS s, COUNT(DISTINCT v) AS c FROM t GROUP BY k"
    )
    assert _changes(dsl) == _changes(sql)
    assert "COUNT(DISTINCT v)" in dsl.explain()


def test_distinct_and_filter_over_an_updating_input_retract_correctly() -> None:
    """The outer aggregate takes ``-U``/``+U`` of the inner: a value leaves the distinct set
    only when its last copy is retracted, and a retracted row passes the FILTER as it did
    when it was added."""
    rows = _rows(3, 150)
    t_env = _t_env()
    _table(t_env, rows)
    inner = "SELECT k, v, COUNT(*) AS n, MAX(p) AS top FROM t GROUP BY k, v"
    result = t_env.sql_query(
        "SELECT v, COUNT(DISTINCT n), SUM(DISTINCT n) FILTER (WHERE top > 5000),"
        " MAX(n), MIN(top), COUNT(*) FILTER (WHERE n > 2)"
        f" FROM ({inner}) GROUP BY v"
    )
    groups: dict[tuple[Any, Any], list[Row]] = {}
    for r in rows:
        groups.setdefault((r[1], r[2]), []).append(r)
    inner_rows = [(k, v, len(g), max(r[3] for r in g)) for (k, v), g in groups.items()]
    expected: Counter[Row] = Counter()
    for v in {r[1] for r in inner_rows}:
        g = [r for r in inner_rows if r[1] == v]
        ns = _distinct(r[2] for r in g)
        rich = _distinct(r[2] for r in g if r[3] > 5000)
        expected[
            (
                v,
                len(ns),
                sum(rich) if rich else None,
                max(r[2] for r in g),
                min(r[3] for r in g),
                sum(1 for r in g if r[2] > 2),
            )
        ] += 1
    changes = _changes(result)
    assert any(kind == "-U" for kind, _ in changes)
    assert _view(changes) == expected


def test_a_filter_whose_condition_is_null_drops_the_row() -> None:
    t_env = _t_env()
    _table(t_env, [(1, "a", None, 1), (2, "a", 3, 2), (3, "a", 4, 3)])
    result = t_env.sql_query(
        "SELECT COUNT(*) FILTER (WHERE v > 3), COUNT(*) FILTER (WHERE v IS NULL OR v > 3),"
        " COUNT(*) FILTER (WHERE NOT v > 3) FROM t"
    )
    assert _view(_changes(result)) == Counter({(1, 2, 1): 1})


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT UPPER(k) FILTER (WHERE v > 1) FROM t", "FILTER applies to an aggregate"),
        ("SELECT COUNT(*) FILTER (WHERE v) FROM t", "FILTER takes a BOOLEAN"),
        ("SELECT COUNT(DISTINCT v, k) FROM t", "takes one column"),
        ("SELECT UPPER(DISTINCT k) FROM t", "UPPER(DISTINCT ...) is not supported"),
    ],
)
def test_bad_distinct_and_filter_are_refused(sql: str, message: str) -> None:
    t_env = _t_env()
    _table(t_env, [(1, "a", 1, 1)])
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        t_env.sql_query(sql).execute().collect()


# ---- statistics and ordered aggregates -----------------------------------------------------


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _flink_variance(values: list[int], sample: bool) -> int | None:
    """Calcite's rewrite in INT arithmetic: (SUM(x*x) - SUM(x)*SUM(x)/COUNT) / (COUNT [-1])."""
    n = len(values)
    if n == 0 or (sample and n == 1):
        return None
    s = sum(values)
    diff = sum(v * v for v in values) - _java_div(s * s, n)
    return _java_div(diff, n - 1 if sample else n)


def test_variance_and_stddev_follow_flinks_rewrite() -> None:
    rows = _rows(4, 80)
    t_env = _t_env()
    _table(t_env, rows)
    result = t_env.sql_query(
        "SELECT k, VAR_POP(v), VAR_SAMP(v), STDDEV_POP(v), STDDEV_SAMP(v),"
        " STDDEV_POP(CAST(p AS DOUBLE)) FROM t GROUP BY k"
    )

    def stats(group: list[Row]) -> Row:
        vs = [r[2] for r in group if r[2] is not None]
        pop, samp = _flink_variance(vs, False), _flink_variance(vs, True)
        ps = [float(r[3]) for r in group]
        mean = sum(ps) / len(ps)
        return (
            group[0][1],
            pop,
            samp,
            None if pop is None else int(math.sqrt(pop)),
            None if samp is None else int(math.sqrt(samp)),
            math.sqrt(max(sum(p * p for p in ps) / len(ps) - mean * mean, 0.0)),
        )

    got = _changes(result)
    want = _expected_changelog(rows, lambda r: r[1], stats)
    assert [(kind, row[:5]) for kind, row in got] == [(kind, row[:5]) for kind, row in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert g[5] == pytest.approx(w[5], rel=1e-9, abs=1e-6)


def test_first_last_value_and_listagg_with_retraction() -> None:
    """Over an updating input: a retraction removes the earliest equal value."""
    t_env = _t_env()
    rows = [(1, "a", 1, 5), (2, "b", 1, 6), (3, "a", 2, 7), (4, "c", 2, 8), (5, "a", 1, 9)]
    _table(t_env, rows)
    # the inner's last row per v changes as rows come: -U/+U reach the outer aggregate
    inner = "SELECT v, LAST_VALUE(k) AS k FROM t GROUP BY v"
    result = t_env.sql_query(
        f"SELECT FIRST_VALUE(k), LAST_VALUE(k), LISTAGG(k), LISTAGG(k, '|') FROM ({inner})"
    )
    # the inner's changes: +I(1,a) -U(1,a) +U(1,b) +I(2,a) -U(2,a) +U(2,c) -U(1,b) +U(1,a);
    # the outer's values after each, in arrival order (a retraction removes the earliest)
    states: list[list[str]] = [["a"], [], ["b"], ["b", "a"], ["b"], ["b", "c"], ["c"], ["c", "a"]]
    expected: list[tuple[str, Row]] = []

    def result_of(values: list[str]) -> Row:
        return (values[0], values[-1], ",".join(values), "|".join(values))

    for before, after in itertools.pairwise([[], *states]):
        if not before:
            expected.append(("+I", result_of(after)))
        elif not after:
            expected.append(("-D", result_of(before)))
        else:
            expected += [("-U", result_of(before)), ("+U", result_of(after))]
    assert _changes(result) == expected


# ---- GROUPING SETS -------------------------------------------------------------------------


def _grouping_oracle(rows: list[Row], sets: list[tuple[str, ...]]) -> Counter[Row]:
    """``k, v, COUNT(*), SUM(p), COUNT(v), GROUPING(k), GROUPING_ID(k, v)`` per set."""
    position = {"k": 1, "v": 2}
    out: Counter[Row] = Counter()
    for s in sets:
        groups: dict[tuple[Any, ...], list[Row]] = {}
        for r in rows:
            groups.setdefault(tuple(r[position[c]] for c in s), []).append(r)
        for values, g in groups.items():
            keyed = dict(zip(s, values, strict=True))
            gk, gv = int("k" not in s), int("v" not in s)
            out[
                (
                    keyed.get("k"),
                    keyed.get("v"),
                    len(g),
                    sum(r[3] for r in g),
                    sum(1 for r in g if r[2] is not None),
                    gk,
                    gk * 2 + gv,
                )
            ] += 1
    return out


@pytest.mark.parametrize(
    ("clause", "sets"),
    [
        ("GROUPING SETS ((k, v), (k), ())", [("k", "v"), ("k",), ()]),
        ("ROLLUP (k, v)", [("k", "v"), ("k",), ()]),
        ("CUBE (k, v)", [("k", "v"), ("k",), ("v",), ()]),
        ("k, ROLLUP (v)", [("k", "v"), ("k",)]),
        ("GROUPING SETS ((v), (k))", [("v",), ("k",)]),
    ],
)
def test_grouping_sets_give_each_sets_groups(clause: str, sets: list[tuple[str, ...]]) -> None:
    rows = _rows(5, 90)
    t_env = _t_env(parallelism=2)
    _table(t_env, rows)
    result = t_env.sql_query(
        "SELECT k, v, COUNT(*), SUM(p), COUNT(v), GROUPING(k), GROUPING_ID(k, v)"
        f" FROM t GROUP BY {clause}"
    )
    assert _view(_changes(result)) == _grouping_oracle(rows, sets)


def test_grouping_sets_with_having_and_an_updating_input() -> None:
    rows = _rows(6, 90)
    t_env = _t_env()
    _table(t_env, rows)
    inner = "SELECT k, v, MAX(p) AS top FROM t GROUP BY k, v"
    result = t_env.sql_query(
        f"SELECT k, GROUPING(k) AS g, COUNT(*) AS n, MAX(top) AS m FROM ({inner})"
        " GROUP BY ROLLUP (k)"
        " HAVING COUNT(*) > 1"
    )
    groups: dict[tuple[Any, Any], int] = {}
    for r in rows:
        groups[(r[1], r[2])] = max(groups.get((r[1], r[2]), -1), r[3])
    expected: Counter[Row] = Counter()
    for k in {k for k, _ in groups}:
        tops = [top for (kk, _), top in groups.items() if kk == k]
        if len(tops) > 1:
            expected[(k, 0, len(tops), max(tops))] += 1
    expected[(None, 1, len(groups), max(groups.values()))] += 1
    # HAVING filters the aggregate's changelog row by row (as Flink's Calc): compare the
    # final rows per key instead of the multiset of a filtered changelog
    final: dict[Any, Row] = {}
    for kind, row in _changes(result):
        if kind in ("+I", "+U"):
            final[row[:2]] = row
        elif final.get(row[:2]) == row:
            del final[row[:2]]
    assert Counter(final.values()) == expected


def test_grouping_without_grouping_sets_is_zero_and_bad_arguments_are_refused() -> None:
    t_env = _t_env()
    _table(t_env, [(1, "a", 1, 1), (2, "a", 2, 2)])
    result = t_env.sql_query("SELECT k, GROUPING(k) FROM t GROUP BY k")
    assert _view(_changes(result)) == Counter({("a", 0): 1})
    with pytest.raises(SqlValidationError, match="must be a grouping expression"):
        t_env.sql_query("SELECT GROUPING(p) FROM t GROUP BY ROLLUP (k)")
    with pytest.raises(SqlValidationError, match="Duplicate grouping sets"):
        t_env.sql_query("SELECT COUNT(*) FROM t GROUP BY GROUPING SETS ((k), (k))")


# ---- OVER aggregates in SQL ----------------------------------------------------------------


def _timed_env() -> TableEnvironment:
    """``s(ts, k, v)``: ten events a second apart (one out of order), ``ts`` a rowtime."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    events = [(t * 1000, "ab"[t % 2], t % 4) for t in (0, 1, 2, 4, 3, 5, 6, 7, 8, 9)]
    ds = env.from_collection(
        [(Instant.of_epoch_milli(ms), k, v) for ms, k, v in events],
        type_info=Types.ROW([Types.INSTANT(), Types.STRING(), Types.INT()]),
    )
    table = t_env.from_data_stream(
        ds,
        Schema.new_builder()
        .column_by_expression("ts", "CAST(f0 AS TIMESTAMP(3))")
        .column("f1", DataTypes.STRING())
        .column("f2", DataTypes.INT())
        .watermark("ts", "ts - INTERVAL '5' SECOND")
        .build(),
    ).alias("ts", "k", "v")
    t_env.create_temporary_view("s", table)
    return t_env


def test_over_aggregates_in_sql_several_on_one_window_with_distinct() -> None:
    t_env = _timed_env()
    result = t_env.sql_query(
        "SELECT k, v, SUM(v) OVER w, COUNT(DISTINCT v) OVER w, MAX(v) OVER w,"
        " VAR_POP(v) OVER w FROM s"
        " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"
    )
    rows = sorted(tuple(r) for r in result.execute().collect())
    expected = []
    for k in "ab":
        # the partition's rows in time order: ts = t seconds, v = t % 4
        vs = [t % 4 for t in range(10) if "ab"[t % 2] == k]
        for i, v in enumerate(vs):
            frame = vs[max(0, i - 2) : i + 1]
            expected.append(
                (k, v, sum(frame), len(set(frame)), max(frame), _flink_variance(frame, False))
            )
    assert rows == sorted(expected)


def test_an_over_range_window_in_sql() -> None:
    t_env = _timed_env()
    result = t_env.sql_query(
        "SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY ts"
        " RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW) FROM s"
    )
    rows = sorted(tuple(r) for r in result.execute().collect())
    expected = sorted(
        (
            "ab"[t % 2],
            t % 4,
            sum(u % 4 for u in range(10) if u % 2 == t % 2 and t - 3 <= u <= t),
        )
        for t in range(10)
    )
    assert rows == expected


# ---- restore -------------------------------------------------------------------------------

SAVEPOINT_KEYS = ("a", "b", "c")


def _event(i: int) -> Any:
    return (SAVEPOINT_KEYS[i % 3], i)


def _distinct_counting(parallelism: int, conf: dict[str, str]) -> Any:
    """Per key, ``COUNT(DISTINCT v % 40)``: each key sees the 40 values again and again."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess", **conf})
    env.set_parallelism(parallelism)
    row = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()])
    source = DataGeneratorSource(_event, 1_000_000, RateLimiterStrategy.per_second(100), row)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "events", row).uid("events")
    t_env = StreamTableEnvironment.create(env)
    t_env.create_temporary_view("e", t_env.from_data_stream(ds))
    return t_env.sql_query(
        "SELECT k, COUNT(DISTINCT m) AS n FROM (SELECT k, v % 40 AS m FROM e) GROUP BY k"
    ).execute()


def test_a_distinct_aggregate_restores_its_values_at_another_parallelism(tmp_path: Any) -> None:
    """The distinct values survive the savepoint: after the restore (2 subtasks instead of
    1) each key goes on from its count with ``-U``, counts each value once (up by one at a
    time) and stops at the 40 values there are."""
    conf = {
        "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
        "execution.checkpointing.interval": "200 ms",
    }
    first = _distinct_counting(1, conf)
    view: dict[str, int] = {}
    stop = None
    for row in first.collect():
        if row.get_row_kind().short_string() in ("+I", "+U"):
            view[row.k] = row.n
        if stop is None and sum(view.values()) >= 30:
            stop = first.get_job_client().stop_with_savepoint(
                savepoint_directory=(tmp_path / "sp").as_uri()
            )
    assert stop is not None
    location = stop.result(timeout=60)
    assert all(n < 40 for n in view.values()), view  # stopped before any key saw them all

    second = _distinct_counting(2, {**conf, "execution.savepoint.path": location})
    firsts: dict[str, tuple[str, int]] = {}
    last = dict(view)
    for row in second.collect():
        kind = row.get_row_kind().short_string()
        firsts.setdefault(row.k, (kind, row.n))
        if kind == "+U":
            assert row.n == last[row.k] + 1, (row, last)
            last[row.k] = row.n
        if all(last.get(k) == 40 for k in SAVEPOINT_KEYS):
            break
    second.get_job_client().cancel()
    assert firsts == {k: ("-U", n) for k, n in view.items()}


def test_group_by_an_expression_reads_it_in_the_select_list_and_having() -> None:
    rows = _rows(7, 80)
    t_env = _t_env()
    _table(t_env, rows)
    result = t_env.sql_query(
        "SELECT MOD(p, 3) AS m, COUNT(DISTINCT k) FILTER (WHERE v > 1), MAX(MOD(p, 3) + v)"
        " FROM t GROUP BY MOD(p, 3) HAVING MOD(p, 3) <> 1"
    )

    def aggregates(group: list[Row]) -> Row:
        m = group[0][3] % 3
        plus = [m + r[2] for r in group if r[2] is not None]
        return (
            m,
            len(_distinct(r[1] for r in group if r[2] is not None and r[2] > 1)),
            max(plus) if plus else None,
        )

    expected = _expected_changelog(rows, lambda r: r[3] % 3, aggregates)
    assert _changes(result) == [c for c in expected if c[1][0] != 1]
    assert "$f4" in result.explain()
