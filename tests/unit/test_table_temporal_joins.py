"""Temporal joins: ``FOR SYSTEM_TIME AS OF``.

The event-time temporal join operator against a brute-force "latest version at or before the
row's time" over random interleavings (deletions, ties, watermarks), restored in the middle;
whole SQL jobs against a versioned view (Flink's deduplicated ``versioned_rates``) and a
declared versioned table; a lookup join against a ``filesystem`` table; the lookup cache's
rules; and Flink's refusals with their SQL positions."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.events import MAX_WATERMARK
from cairn.graph.transformations import OperatorKind
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import DataTypes, Schema, StreamTableEnvironment, ValidationError
from cairn.table.lookup_cache import LookupCache, cache_options
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from cairn.table.sql.errors import SqlValidationError
from cairn.table.temporal_join import TemporalJoinFunction
from cairn.table.timestamps import epoch_millis

from ._operator_harness import TwoInputHarness, snapshot_operator

# left rows: (key, time ms, order id); right rows: (key, time ms, rate)


def _harness(outer: bool, restore: Any = None) -> TwoInputHarness:
    function = TemporalJoinFunction(3, 1, 1, outer, None)
    return TwoInputHarness(
        OperatorKind.KEYED_CO_PROCESS,
        function,
        keyed=True,
        key_selector=lambda r: r[1][0],
        restore=restore,
    )


def _random_events(rng: random.Random, steps: int) -> list[tuple[Any, ...]]:
    """Rows of both sides, each on time (its time above the watermark when it arrives), and
    watermarks rising between them."""
    events: list[tuple[Any, ...]] = []
    watermark = 0
    for i in range(steps):
        for _ in range(rng.randrange(0, 4)):
            key, t = rng.choice("abc"), watermark + rng.randrange(1, 4_000)
            if rng.random() < 0.5:
                events.append(("left", (INSERT, (key, t, f"o{i}-{len(events)}"))))
            else:
                kind = rng.choice([INSERT, UPDATE_AFTER, UPDATE_AFTER, UPDATE_BEFORE, DELETE])
                events.append(("right", (kind, (key, t, rng.randrange(100)))))
        watermark += rng.randrange(0, 1_500)
        events.append(("wm", watermark))
    return events


def _run(h: TwoInputHarness, events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    for what, value in events:
        if what == "wm":
            h.op.process_watermark(value)
        else:
            h.side(0 if what == "left" else 1, [value])
    out = []
    for (kind, row), _ in h.records():
        assert kind == INSERT, "insert-only left rows stay insert-only"
        out.append(row)
    h.batches.clear()
    return out


def _brute_force(events: list[tuple[Any, ...]], outer: bool) -> Counter[tuple[Any, ...]]:
    versions: dict[str, list[tuple[int, int, Any]]] = {}  # key -> (time, arrival, row or None)
    lefts = []
    for n, (what, value) in enumerate(events):
        if what == "left":
            lefts.append(value[1])
        elif what == "right":
            kind, row = value
            if kind != UPDATE_BEFORE:
                versions.setdefault(row[0], []).append((row[1], n, row if kind != DELETE else None))
    out: Counter[tuple[Any, ...]] = Counter()
    for key, t, order in lefts:
        valid = [v for v in versions.get(key, []) if v[0] <= t]
        latest = max(valid, key=lambda v: (v[0], v[1]))[2] if valid else None
        if latest is not None:
            out[(key, t, order, *latest)] += 1
        elif outer:
            out[(key, t, order, None, None, None)] += 1
    return out


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_each_row_meets_the_version_valid_at_its_time(seed: int, outer: bool) -> None:
    events = [*_random_events(random.Random(seed), 120), ("wm", MAX_WATERMARK)]
    h = _harness(outer)
    got = Counter(_run(h, events))
    expected = _brute_force(events, outer)
    assert got == expected
    assert sum(expected.values()) > 20
    backend = h.op.backend  # type: ignore[attr-defined]
    assert len(backend.keys("temporal-join-left")) == 0, "every row left once released"


def test_versions_the_watermark_has_passed_are_dropped_but_the_current_one_kept() -> None:
    h = _harness(False)
    for t, rate in [(1_000, 1), (2_000, 2), (3_000, 3), (9_000, 9)]:
        h.side(1, [(INSERT, ("eur", t, rate))])
    h.side(0, [(INSERT, ("eur", 2_500, "o1"))])
    h.op.process_watermark(5_000)
    assert _run(h, []) == [("eur", 2_500, "o1", "eur", 2_000, 2)]
    # late rows meet only the versions kept: 1 s and 2 s can no longer be chosen...
    h.side(0, [(INSERT, ("eur", 2_600, "late1")), (INSERT, ("eur", 3_500, "late2"))])
    assert _run(h, []) == [("eur", 3_500, "late2", "eur", 3_000, 3)]
    h.side(0, [(INSERT, ("eur", 6_000, "o2"))])
    h.op.process_watermark(MAX_WATERMARK)
    assert _run(h, []) == [("eur", 6_000, "o2", "eur", 3_000, 3)]


def test_a_join_restored_in_the_middle_goes_on_as_one_that_ran_through() -> None:
    events = [*_random_events(random.Random(11), 150), ("wm", MAX_WATERMARK)]
    expected = Counter(_run(_harness(True), events))
    first = _harness(True)
    before = _run(first, events[:90])
    state, files = snapshot_operator(first.op)
    second = _harness(True, OperatorRestore(1, {SubtaskIndex(0): state}, files))
    assert Counter(before + _run(second, events[90:])) == expected


# -- whole jobs --------------------------------------------------------------------------

ORDERS = [("o1", "EUR", 2, 1_000), ("o2", "USD", 1, 3_000), ("o3", "EUR", 5, 7_000),
          ("o4", "JPY", 9, 8_000), ("o5", "EUR", 1, 12_000)]  # fmt: skip
RATES = [("EUR", 114, 0), ("USD", 102, 0), ("EUR", 116, 5_000), ("EUR", 119, 10_000),
         ("USD", 105, 2_500)]  # fmt: skip


def _t_env(parallelism: int = 2) -> StreamTableEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)

    def table(rows: list[tuple[Any, ...]], names: list[str]) -> Any:
        types = [Types.STRING() if isinstance(v, str) else Types.LONG() for v in rows[0][:-1]]
        info = Types.ROW([*types, Types.INSTANT()])
        ds = env.from_collection([(*r[:-1], Instant.of_epoch_milli(r[-1])) for r in rows], info)
        builder = Schema.new_builder()
        for i, t in enumerate(types):
            builder.column(
                f"f{i}", DataTypes.STRING() if t == Types.STRING() else DataTypes.BIGINT()
            )
        schema = (
            builder.column_by_expression("ts", f"CAST(f{len(types)} AS TIMESTAMP(3))")
            .watermark("ts", "ts - INTERVAL '1' SECOND")
            .build()
        )
        return (
            t_env.from_data_stream(ds, schema)
            .select(*[f"f{i}" for i in range(len(types))], "ts")
            .alias(*names)
        )

    t_env.create_temporary_view(
        "orders", table(ORDERS, ["order_id", "currency", "price", "order_time"])
    )
    t_env.create_temporary_view("rates", table(RATES, ["currency", "rate", "update_time"]))
    return t_env


def _expected(outer: bool) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for order, currency, price, t in ORDERS:
        valid = [(ut, rate) for c, rate, ut in RATES if c == currency and ut <= t]
        if valid:
            out[(order, price * max(valid)[1], t)] += 1
        elif outer:
            out[(order, None, t)] += 1
    return out


def _rows(table: Any) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for r in table.execute().collect():
        assert r.get_row_kind().short_string() == "+I"
        out[tuple(epoch_millis(v) if hasattr(v, "year") else v for v in r)] += 1
    return out


VERSIONED_VIEW = """
CREATE VIEW versioned_rates AS
SELECT currency, rate, update_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
  FROM rates)
WHERE rownum = 1
"""


@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN"])
def test_flinks_currency_example_against_a_versioned_view(join: str) -> None:
    t_env = _t_env()
    t_env.execute_sql(VERSIONED_VIEW)
    result = t_env.sql_query(
        "SELECT order_id, price * r.rate AS amount, order_time FROM orders"
        f" {join} versioned_rates FOR SYSTEM_TIME AS OF orders.order_time AS r"
        " ON orders.currency = r.currency"
    )
    assert "TemporalJoin(joinType=[" in result.explain()
    assert _rows(result) == _expected(join == "LEFT JOIN")


def test_a_declared_versioned_table_with_a_primary_key(tmp_path: Path) -> None:
    t_env = _t_env()
    # the rates as a declared table: a primary key and a watermark, on a connector that is
    # also a lookup table (the rowtime attribute makes it a temporal join, as in Flink)
    t_env.execute_sql(
        "CREATE TABLE rates_file (currency STRING, rate BIGINT, update_time TIMESTAMP(3),"
        " WATERMARK FOR update_time AS update_time, PRIMARY KEY (currency) NOT ENFORCED)"
        f" WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'csv'}', 'format' = 'csv')"
    )
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "rates.csv").write_text("".join(f"{c},{r},{_ts(t)}\n" for c, r, t in RATES))
    result = t_env.sql_query(
        "SELECT o.order_id, o.price * r.rate, o.order_time FROM orders AS o"
        " JOIN rates_file FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
    )
    assert "TemporalJoin" in result.explain() and "LookupJoin" not in result.explain()
    assert _rows(result) == _expected(False)


def _ts(ms: int) -> str:
    import datetime

    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_what_flink_refuses_is_refused_at_the_join() -> None:
    t_env = _t_env()
    t_env.execute_sql(VERSIONED_VIEW)

    def error(sql: str) -> str:
        with pytest.raises(SqlValidationError) as e:
            t_env.sql_query(sql)
        return str(e.value)

    no_key = error(
        "SELECT * FROM orders JOIN rates FOR SYSTEM_TIME AS OF orders.order_time AS r"
        " ON orders.currency = r.currency"
    )
    assert "requires primary key in versioned table" in no_key and "line 1" in no_key
    key_missing = error(
        "SELECT * FROM orders JOIN versioned_rates FOR SYSTEM_TIME AS OF orders.order_time AS r"
        " ON orders.price = r.rate"
    )
    assert "primary key [currency0] must be included" in key_missing
    right = error(
        "SELECT * FROM orders RIGHT JOIN versioned_rates FOR SYSTEM_TIME AS OF orders.order_time"
        " AS r ON orders.currency = r.currency"
    )
    assert "INNER or a LEFT join" in right
    not_time = error(
        "SELECT * FROM orders JOIN versioned_rates FOR SYSTEM_TIME AS OF orders.price AS r"
        " ON orders.currency = r.currency"
    )
    assert "time attribute field" in not_time


# -- lookup joins ----------------------------------------------------------------------------


def test_a_lookup_join_against_a_filesystem_table(tmp_path: Path) -> None:
    (tmp_path / "side.csv").write_text("".join(f"{k},v{k}\n" for k in range(0, 10, 2)))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        "CREATE TABLE side (key BIGINT, `value` STRING) WITH ('connector' = 'filesystem',"
        f" 'path' = '{tmp_path}', 'format' = 'csv')"
    )
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT, pt AS PROCTIME()) WITH ('connector' = 'datagen',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '30')"
    )
    for join, outer in [("JOIN", False), ("LEFT JOIN", True)]:
        result = t_env.sql_query(
            f"SELECT id, s.`value` FROM src {join} side FOR SYSTEM_TIME AS OF src.pt AS s"
            " ON MOD(src.id, 10) = s.key AND s.`value` <> 'v4'"
        )
        plan = result.explain()
        assert "LookupJoin(table=[default_catalog.default_database.side]" in plan
        assert "lookup=[key=$lookup_key0]" in plan
        expected: Counter[tuple[Any, ...]] = Counter()
        for i in range(1, 31):
            if i % 10 in (0, 2, 6, 8):
                expected[(i, f"v{i % 10}")] += 1
            elif outer:
                expected[(i, None)] += 1
        assert _rows(result) == expected


def test_the_lookup_cache_follows_flinks_options() -> None:
    assert not cache_options({}).enabled  # lookup.cache NONE by default
    partial = cache_options(
        {
            "lookup.cache": "PARTIAL",
            "lookup.partial-cache.max-rows": "2",
            "lookup.partial-cache.expire-after-write": "10 s",
            "lookup.partial-cache.expire-after-access": "4 s",
            "lookup.partial-cache.cache-missing-key": "false",
        }
    )
    cache = LookupCache(partial)
    cache.put((1,), [("a",)], now_ms=0)
    cache.put((2,), [], now_ms=0)  # a missing key is not kept
    assert cache.get((2,), now_ms=1) is None and len(cache) == 1
    assert cache.get((1,), now_ms=3_000) == [("a",)]  # read at 3 s: access expiry at 7 s
    assert cache.get((1,), now_ms=6_999) == [("a",)]
    assert cache.get((1,), now_ms=10_000) is None  # written 10 s ago
    for k in range(3):
        cache.put((k,), [(k,)], now_ms=20_000)
    assert cache.get((0,), now_ms=20_001) is None and len(cache) == 2  # LRU evicted
    legacy = cache_options({"lookup.cache.max-rows": "5", "lookup.cache.ttl": "1 min"})
    assert legacy.enabled and legacy.max_rows == 5 and legacy.expire_after_write_ms == 60_000
    with pytest.raises(ValidationError, match=r"SOMETIMES.*lookup\.cache"):
        cache_options({"lookup.cache": "SOMETIMES"})
