"""The columnar CSV scan returns what the row path returns (rows, order, timestamps), covers
dropped rows in its watermark input, resumes exactly at its position, and names the line
of a malformed record; the planner pushes projections, filters and the watermark into it
only when it can compute them."""

from __future__ import annotations

import datetime
import io
import random
from typing import Any

import pytest

from cairn.api.connectors import TimestampedBatch
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import StreamTableEnvironment
from cairn.table.analysis import Columns, Rex
from cairn.table.columnar_csv import ColumnarCsvFormat
from cairn.table.filesystem import line_rows
from cairn.table.scan_pushdown import ScanSpec
from cairn.table.timestamps import epoch_millis
from cairn.table.types import DataTypes

COLUMNS = Columns.of(
    [
        ("kind", DataTypes.INT()),
        ("id", DataTypes.BIGINT()),
        ("name", DataTypes.STRING()),
        ("t0", DataTypes.TIMESTAMP(3)),
        ("t1", DataTypes.TIMESTAMP(3)),
        ("ok", DataTypes.BOOLEAN()),
        ("x", DataTypes.DOUBLE()),
    ]
)


def _ref(i: int) -> Rex:
    return Rex("input", COLUMNS.types[i], index=i)


def _lit(value: Any, data_type: Any) -> Rex:
    return Rex("literal", data_type, value=value)


def _call(op: str, data_type: Any, *operands: Rex) -> Rex:
    return Rex("call", data_type, op=op, operands=operands)


BOOL = DataTypes.BOOLEAN()
IS_ONE = _call("equals", BOOL, _ref(0), _lit(1, DataTypes.INT(False)))
EVENT_TIME = _call("if", DataTypes.TIMESTAMP(3), IS_ONE, _ref(3), _ref(4))
KEEP = _call(
    "and",
    BOOL,
    _call("not_equals", BOOL, _ref(0), _lit(2, DataTypes.INT(False))),
    _call(
        "or",
        BOOL,
        _call("is_null", BOOL, _ref(2)),
        _call("greater_than", BOOL, _ref(1), _lit(3, DataTypes.BIGINT(False))),
    ),
)
SPEC = ScanSpec(COLUMNS, (_ref(2), _ref(1), EVENT_TIME, _ref(5), _ref(6)), KEEP, EVENT_TIME, 500)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"' if any(c in value for c in ',"') else value
    return str(value).lower() if isinstance(value, bool) else str(value)


def _random_file(rng: random.Random, lines: int) -> bytes:
    base = datetime.datetime(2026, 1, 1)
    out = []
    for _ in range(lines):
        if rng.random() < 0.05:
            out.append("")  # an empty line: no row
            continue
        row = [
            rng.choice([0, 1, 2, None]),
            rng.choice([rng.randrange(-5, 10), None]),
            rng.choice(["a", "b,c", 'say "hi"', "", None, "ü"]),
            rng.choice([base + datetime.timedelta(milliseconds=rng.randrange(10**6)), None]),
            base + datetime.timedelta(milliseconds=rng.randrange(10**6)),
            rng.choice([True, False, None]),
            rng.choice([1.5, -0.25, 1e20, None]),
        ]
        out.append(",".join(_text(v) for v in row))
    ending = rng.choice(["\n", "\r\n"])
    return (ending.join(out) + rng.choice([ending, ""])).encode()


def _row_path(data: bytes, spec: ScanSpec, options: dict[str, str]) -> tuple[list, list, int]:
    """The expected rows, timestamps and highest event time, row at a time."""
    fmt = line_rows(COLUMNS, options)
    texts = data.decode().replace("\r\n", "\n").split("\n")
    from cairn.table.codegen import CompiledCalc, calc_source

    calc = CompiledCalc(calc_source(spec.projections, spec.condition, [])).function()
    rowtime = CompiledCalc(calc_source([spec.rowtime], None, [])).function()
    rows, stamps, high = [], [], -(2**63)
    for _, row in fmt.records(texts, 0):
        at = rowtime(row)[0]  # type: ignore[index]
        ms = -(2**63) if at is None else epoch_millis(at)
        high = max(high, ms)
        out = calc(row)
        if out is not None:
            rows.append((0, out))
            stamps.append(ms)
    return rows, stamps, high


def _read_all(fmt: ColumnarCsvFormat, data: bytes, rng: random.Random) -> tuple[list, list, int]:
    """Everything the columnar reader returns, in polls of random size, reopened at its
    position after some polls (a restore)."""
    rows: list[Any] = []
    stamps: list[Any] = []
    high = -(2**63)
    position, line = 0, 0
    while True:
        reader = fmt.create_reader(io.BytesIO(data), position, line)
        for _ in range(rng.randrange(1, 6)):
            batch = reader.read(rng.choice([1, 2, 7, 100, 1024]))
            assert type(batch) is TimestampedBatch
            if batch.max_read is not None:
                high = max(high, batch.max_read)
            if not batch:
                assert reader.at_end
                return rows, stamps, high
            rows.extend(batch)
            stamps.extend(batch.timestamps)
            position, line = reader.position, reader.line


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("null_literal", [None, ""])
def test_the_columnar_reader_returns_what_the_row_path_returns(
    seed: int, null_literal: str | None
) -> None:
    rng = random.Random(seed)
    data = _random_file(rng, rng.choice([0, 1, 50, 3000]))
    options = {"format": "csv"}
    if null_literal is not None:
        options["csv.null-literal"] = null_literal
    fmt = ColumnarCsvFormat(SPEC, options, line_rows(COLUMNS, options))
    expected = _row_path(data, SPEC, options)
    assert _read_all(fmt, data, rng) == expected


def test_the_watermark_input_covers_the_rows_the_filter_dropped() -> None:
    data = b"2,9,a,2026-01-01 00:00:09.000,2026-01-01 00:00:09.000,true,1\n" + (
        b"0,5,b,2026-01-01 00:00:01.000,2026-01-01 00:00:01.000,true,1\n"
    )
    fmt = ColumnarCsvFormat(SPEC, {"format": "csv"}, line_rows(COLUMNS, {"format": "csv"}))
    batch = fmt.create_reader(io.BytesIO(data), 0, 0).read(10)
    assert [r[1][0] for r in batch] == ["b"]  # kind 2 was dropped...
    assert batch.max_read == epoch_millis(datetime.datetime(2026, 1, 1, 0, 0, 9))  # ...not its time


def test_a_malformed_line_is_named_and_the_rows_before_it_are_not_lost() -> None:
    good = b"0,5,a,2026-01-01 00:00:01.000,2026-01-01 00:00:01.000,true,1\n"
    data = good * 3 + b"0,oops,a,,2026-01-01 00:00:01.000,true,1\n" + good
    fmt = ColumnarCsvFormat(SPEC, {"format": "csv"}, line_rows(COLUMNS, {"format": "csv"}))
    with pytest.raises(ValueError, match=r"line 4: .*'oops'"):
        fmt.create_reader(io.BytesIO(data), 0, 0).read(10)
    reader = fmt.create_reader(io.BytesIO(data), 0, 0)
    with pytest.raises(ValueError, match="line 4"):
        reader.read(10)
    assert reader.position == 0  # nothing was returned: a restore reads from the start again


def test_values_arrow_reads_differently_go_through_the_row_path() -> None:
    # " 7" (a padded number) and "True " are refused by Arrow, read by the row path
    data = b"0, 7,a,2026-01-01 00:00:01,2026-01-01 00:00:02,true ,2.5\n"
    fmt = ColumnarCsvFormat(SPEC, {"format": "csv"}, line_rows(COLUMNS, {"format": "csv"}))
    batch = fmt.create_reader(io.BytesIO(data), 0, 0).read(10)
    assert list(batch) == [(0, ("a", 7, datetime.datetime(2026, 1, 1, 0, 0, 2), True, 2.5))]


def _t_env() -> StreamTableEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    return StreamTableEnvironment.create(env)


def _events(tmp_path: Any) -> str:
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "part-0.csv").write_text(
        "".join(f"{k % 3},{k},n{k},2026-01-01 00:00:{k:02d}.000,x\n" for k in range(40))
    )
    return str(folder)


def _ddl(path: str, extra: str = "") -> str:
    return f"""CREATE TABLE events (
        kind INT, id BIGINT, name STRING, ts TIMESTAMP(3), note STRING,
        WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
    ) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'{extra})"""


def test_sql_pushes_the_filter_projection_and_watermark_and_keeps_its_results(
    tmp_path: Any,
) -> None:
    path = _events(tmp_path)
    query = (
        "SELECT window_start, COUNT(*), SUM(id) FROM TABLE(TUMBLE(TABLE events, "
        "DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE kind <> 1 GROUP BY window_start, "
        "window_end"
    )
    pushed = _t_env()
    pushed.execute_sql(_ddl(path))
    plan = pushed.explain_sql(query)
    assert "TableSourceScan(table=[default_catalog.default_database.events]" in plan
    assert "filter=[not_equals(kind, 1)]" in plan and "watermark=[ts - 2000" in plan
    # comments allowed: the row path (nothing pushed), the same rows
    row_path = _t_env()
    row_path.execute_sql(_ddl(path, ", 'csv.allow-comments' = 'true'"))
    assert "TableSourceScan" not in row_path.explain_sql(query)
    got = sorted(tuple(r) for r in pushed.execute_sql(query).collect())
    assert got == sorted(tuple(r) for r in row_path.execute_sql(query).collect())
    expected = {}
    for k in range(40):
        if k % 3 != 1:
            start = datetime.datetime(2026, 1, 1, 0, 0, (k // 10) * 10)
            count, total = expected.get(start, (0, 0))
            expected[start] = (count + 1, total + k)
    assert got == sorted((s, c, t) for s, (c, t) in expected.items())


def test_equal_pushdowns_share_one_source_and_different_ones_do_not(tmp_path: Any) -> None:
    from cairn.table.filesystem import filesystem_scan

    options = {"connector": "filesystem", "path": _events(tmp_path), "format": "csv"}
    scan = filesystem_scan("events", COLUMNS, options)
    env = StreamExecutionEnvironment.get_execution_environment()
    other = ScanSpec(COLUMNS, (_ref(1),), IS_ONE)
    first, second = scan.pushdown.build(SPEC), scan.pushdown.build(SPEC)
    assert first(env) is second(env)
    assert scan.pushdown.build(other)(env) is not first(env)
    assert first(env) is second(env)  # building another spec forgot neither


def test_two_reads_of_a_table_with_one_filter_share_one_scan(tmp_path: Any) -> None:
    t_env = _t_env()
    t_env.execute_sql(_ddl(_events(tmp_path)))
    query = (
        "SELECT a.id, a.name, b.total FROM (SELECT id, name FROM events WHERE kind = 0) AS a "
        "JOIN (SELECT kind, SUM(id) AS total FROM events WHERE kind = 0 GROUP BY kind) AS b "
        "ON a.id > b.kind"
    )
    plan = t_env.explain_sql(query).split("== Optimized Logical Plan ==")[1]
    scans = [line.strip(" +-:") for line in plan.splitlines() if "TableSourceScan" in line]
    assert len(scans) == 2 and scans[0] == scans[1], plan  # one scan, read by both sides
    assert "project=[kind, id, name, ts]" in scans[0]
    rows = {tuple(r) for r in t_env.execute_sql(query).collect()}
    total = sum(k for k in range(40) if k % 3 == 0)
    assert {(r[0], r[1]) for r in rows if r[2] == total} == {(k, f"n{k}") for k in range(3, 40, 3)}
