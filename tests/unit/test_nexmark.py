"""The Nexmark generator, the ``nexmark`` table connector and the query files.

The generator's events are a pure function of the event number: the same for a seed at any
split, in Flink's proportions, with ids and times by nexmark-flink's rules. The connector
takes nexmark-flink's options and DDL (the ROW fields read with ``person.id``), and every
query file starts with the shared DDL.
"""

from __future__ import annotations

import collections
import datetime
import re
from pathlib import Path
from typing import Any

import pytest

from cairn.api.connectors import SourceReaderContext
from cairn.datastream.connectors.nexmark import NexmarkGenerator, nexmark_source
from cairn.datastream.connectors.nexmark_model import (
    AUCTION,
    BID,
    DEFAULT_BASE_TIME_MS,
    PERSON,
    NexmarkConfig,
)
from cairn.ids import AttemptNumber, JobId, SubtaskIndex
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.errors import ValidationError
from cairn.table.expressions import col
from cairn.table.sql.script import split_statements

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "nexmark"
_EPOCH = datetime.datetime(1970, 1, 1)


def _millis(t: datetime.datetime) -> int:
    return (t - _EPOCH) // datetime.timedelta(milliseconds=1)


def _events(config: NexmarkConfig, count: int) -> list[Any]:
    return NexmarkGenerator(config).generate_batch(range(count))


def test_a_seed_names_one_stream_and_another_seed_only_redraws() -> None:
    first = _events(NexmarkConfig(seed=3), 2000)
    assert first == _events(NexmarkConfig(seed=3), 2000)
    other = _events(NexmarkConfig(seed=4), 2000)
    assert other != first
    # kinds, own ids and times depend on the event number only
    assert [e[0] for e in other] == [e[0] for e in first]
    persons = [(e[1][0], e[1][6]) for e in first if e[0] == PERSON]
    assert persons == [(e[1][0], e[1][6]) for e in other if e[0] == PERSON]


def test_kinds_repeat_in_flinks_proportions_and_ids_count_up() -> None:
    events = _events(NexmarkConfig(), 5000)
    kinds = collections.Counter(e[0] for e in events)
    assert kinds == {PERSON: 100, AUCTION: 300, BID: 4600}
    persons = [e[1][0] for e in events if e[0] == PERSON]
    auctions = [e[2][0] for e in events if e[0] == AUCTION]
    assert persons == list(range(1001, 1101))  # person 1000 falls before event 0
    assert auctions == list(range(1001, 1301))  # nexmark-flink's first event ids are 2, 3
    # a bid's auction and bidder exist already or are at most 10 ahead (the id lead)
    last_auction = last_person = 1000
    for e in events:
        if e[0] == PERSON:
            last_person = e[1][0]
        elif e[0] == AUCTION:
            last_auction = e[2][0]
            assert 1000 <= e[2][7] <= last_person + 10  # seller
            assert 10 <= e[2][8] <= 14  # category
            assert e[2][4] >= e[2][3]  # reserve >= initial bid
            assert e[2][6] > e[2][5]  # expires after it starts
        else:
            assert 1000 <= e[3][0] <= last_auction + 10
            assert 1000 <= e[3][1] <= last_person + 10


def test_hot_auctions_bidders_and_channels_follow_the_ratios() -> None:
    bids = [e[3] for e in _events(NexmarkConfig(seed=1), 20_000) if e[0] == BID]
    hot_auction = sum(b[0] % 100 == 0 for b in bids) / len(bids)
    hot_bidder = sum(b[1] % 100 == 1 for b in bids) / len(bids)
    hot_channel = sum(not b[3].startswith("channel-") for b in bids) / len(bids)
    # 1 - 1/ratio hot, plus the cold draws that land on a hot id
    assert 0.48 < hot_auction < 0.56
    assert 0.73 < hot_bidder < 0.80
    assert 0.47 < hot_channel < 0.53
    assert {b[3] for b in bids if not b[3].startswith("channel-")} == {
        "Google",
        "Facebook",
        "Baidu",
        "Apple",
    }
    with_id = [b for b in bids if b[3].startswith("channel-")]
    assert 0.85 < sum("&channel_id=" in b[4] for b in with_id) / len(with_id) < 0.95
    extra = sum(len(b[6]) for b in bids) / len(bids)
    assert 64 < extra < 72  # 100 bytes a bid on average, 32 of them the numbers


def test_event_time_advances_at_the_first_event_rate() -> None:
    config = NexmarkConfig(first_event_rate=1000, base_time_ms=5_000)
    events = _events(config, 3000)
    times = [_millis(e[e[0] + 1][5 if e[0] == BID else 6 if e[0] == PERSON else 5]) for e in events]
    assert times == [5_000 + n + 1 for n in range(3000)]  # event n has number n + 1, 1 ms each
    assert _millis(_events(NexmarkConfig(), 1)[0][2][5]) == DEFAULT_BASE_TIME_MS


def test_out_of_order_groups_scramble_within_a_group_only() -> None:
    def keys(events: list[Any]) -> list[tuple[int, int]]:
        return [(e[0], _millis(e[e[0] + 1][6 if e[0] == PERSON else 5])) for e in events]

    in_order = keys(_events(NexmarkConfig(first_event_rate=1000), 1000))
    scrambled = keys(
        _events(NexmarkConfig(first_event_rate=1000, out_of_order_group_size=10), 1000)
    )
    assert scrambled[9:19] != in_order[9:19]
    # event n has number n + 1: events 9..988 fill the groups of numbers 10..989
    assert sorted(scrambled[9:989]) == sorted(in_order[9:989])


@pytest.mark.parametrize("parallelism", [1, 3, 4])
def test_the_sources_splits_together_emit_one_generators_events(parallelism: int) -> None:
    config = NexmarkConfig(events_num=1234, seed=9)
    source = nexmark_source(config)
    emitted = []
    for index, split in enumerate(source.create_splits(parallelism)):
        context = SourceReaderContext(
            SubtaskIndex(index), parallelism, AttemptNumber(0), JobId("j")
        )
        reader = source.create_reader([split], context)
        while (batch := reader.poll_batch(100)) is not None:
            emitted.extend(batch)
    assert sorted(emitted, key=repr) == sorted(_events(config, 1234), key=repr)


def test_without_max_emit_speed_the_source_is_rate_limited() -> None:
    limited = nexmark_source(NexmarkConfig(first_event_rate=500, max_emit_speed=False))
    assert limited.rate_limiter_strategy.records_per_second == 500
    assert not limited.is_bounded()
    assert nexmark_source(NexmarkConfig()).rate_limiter_strategy.records_per_second is None


def _t_env(**conf: str) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    for key, value in conf.items():
        t_env.get_config().set(key, value)
    return t_env


def _ddl(**options: str) -> str:
    text = (BENCH / "ddl.sql").read_text()
    for key, value in options.items():
        text, found = re.subn(rf"'{re.escape(key)}' = '[^']*'", f"'{key}' = '{value}'", text)
        if not found:
            text = text.replace(
                "'connector' = 'nexmark',", f"'connector' = 'nexmark', '{key}' = '{value}',"
            )
    return text


def _run_ddl(t_env: TableEnvironment, text: str) -> None:
    for _, statement in split_statements(text):
        t_env.execute_sql(statement)


def test_flinks_ddl_and_views_read_the_events_of_the_generator() -> None:
    t_env = _t_env()
    _run_ddl(t_env, _ddl(**{"events.num": "500", "seed": "2"}))
    bids = sorted(tuple(r) for r in t_env.execute_sql("SELECT * FROM bid").collect())
    expected = sorted(e[3] for e in _events(NexmarkConfig(seed=2), 500) if e[0] == BID)
    assert bids == expected
    names = t_env.sql_query("SELECT * FROM person").get_schema().names
    assert names == [
        "id",
        "name",
        "emailAddress",
        "creditCard",
        "city",
        "state",
        "dateTime",
        "extra",
    ]
    counts = dict(
        tuple(r)
        for r in t_env.execute_sql(
            "SELECT event_type, COUNT(*) FROM datagen GROUP BY event_type"
        ).collect()
        if r.get_row_kind().short_string() in ("+I", "+U")
    )
    assert counts[0] == 10 and counts[1] == 30 and counts[2] == 460


def test_the_tables_rows_are_the_same_at_any_parallelism() -> None:
    rows = []
    for parallelism in ("1", "3"):
        t_env = _t_env(**{"parallelism.default": parallelism})
        _run_ddl(t_env, _ddl(**{"events.num": "400"}))
        rows.append(sorted(map(repr, t_env.execute_sql("SELECT * FROM auction").collect())))
    assert rows[0] == rows[1] and len(rows[0]) == 24


def _create_fails(ddl: str, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _t_env().execute_sql(ddl.split("CREATE VIEW")[0])


def test_unknown_and_unsupported_options_are_refused_naming_them() -> None:
    _create_fails(
        _ddl(**{"events.nums": "5"}),
        r"(?s)Unsupported options found for 'nexmark'.*events\.nums.*first-event\.rate",
    )
    _create_fails(_ddl(**{"keep-alive": "true"}), "'keep-alive' = 'true' is not supported")
    _create_fails(
        _ddl(**{"person.proportion": "x"}), "option 'person.proportion' of table 'datagen'"
    )
    _create_fails(_ddl(**{"person.proportion": "0"}), "person_proportion must be >= 1")
    _create_fails(_ddl(**{"events.num": "-1"}), "'events.num' must be >= 0, got -1")


def test_a_table_of_another_shape_is_refused() -> None:
    _create_fails(
        "CREATE TABLE t (event_type INT, x BIGINT) WITH ('connector' = 'nexmark')",
        "must have the physical columns event_type INT, person ROW<8 fields>.*got: event_type",
    )


def test_row_fields_by_name_in_sql_and_with_get() -> None:
    t_env = _t_env()
    _run_ddl(t_env, _ddl(**{"events.num": "60"}))
    from_sql = t_env.sql_query("SELECT bid.price AS p FROM datagen WHERE event_type = 2")
    from_api = (
        t_env.from_path("datagen")
        .where(col("event_type") == 2)
        .select(col("bid").get("price").alias("p"))
    )
    prices = sorted(r[0] for r in from_sql.execute().collect())
    assert prices == sorted(r[0] for r in from_api.execute().collect())
    assert len(prices) == 54 and all(isinstance(p, int) for p in prices)
    with pytest.raises(ValidationError, match=r"Field \[cost\] not found"):
        t_env.sql_query("SELECT bid.cost FROM datagen").execute()


def test_every_query_file_runs_after_the_shared_ddl() -> None:
    """Each query file holds its sink and query only; the source table and views are
    ``ddl.sql``'s, given with ``cairn sql -i`` (its header says how to run it)."""
    files = sorted((BENCH / "queries").glob("q*.sql"), key=lambda p: int(p.stem[1:]))
    assert [p.stem for p in files] == [f"q{i}" for i in range(23)]
    for path in files:
        text = path.read_text()
        header, _, rest = text.partition("\n\n")
        assert header.startswith(f"-- Nexmark {path.stem} for Cairn") and "-- Adapted: " in header
        assert (
            f"-- Run: cairn sql -i bench/nexmark/ddl.sql -f {path.relative_to(BENCH.parents[1])}"
            in header
        )
        assert "CREATE TABLE datagen" not in rest, path.name
        assert f"INSERT INTO nexmark_{path.stem}" in rest


def test_a_query_file_runs_standalone_with_cairn_sql(capsys: pytest.CaptureFixture[str]) -> None:
    from cairn.cli.main import main
    from cairn.datastream.stream_execution_environment import reset_context_defaults

    argv = ["sql", "-i", str(BENCH / "ddl.sql"), "-f", str(BENCH / "queries" / "q2.sql")]
    try:
        code = main([*argv, "--executor", "inprocess"])
    finally:
        reset_context_defaults()  # cairn sql set the process's job defaults
    assert code == 0, capsys.readouterr().err
