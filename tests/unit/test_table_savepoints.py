"""A table job's savepoint survives an edit of another statement: operator uids are hashes of
what each node computes and reads, so the untouched statement's aggregate restores its counts
(at another parallelism, too) while the edited one starts afresh."""

from __future__ import annotations

import time
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor
from cairn.table.expressions import col

KEYS = ("a", "b", "c")


def _event(i: int) -> Any:
    return (KEYS[i % 3], i)


def _job(parallelism: int, conf: dict[str, str], edited: bool) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess", **conf})
    env.set_parallelism(parallelism)
    row = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()])
    source = DataGeneratorSource(_event, 1_000_000, RateLimiterStrategy.per_second(300), row)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "events", row).uid("events")
    t_env = StreamTableEnvironment.create(env)
    events = t_env.from_data_stream(ds)
    for name in ("counts", "totals"):
        schema = (
            Schema.new_builder().column("k", DataTypes.STRING()).column("n", DataTypes.BIGINT())
        )
        descriptor = TableDescriptor.for_connector("print").schema(schema.build())
        t_env.create_temporary_table(name, descriptor.option("print-identifier", name).build())
    statements = t_env.create_statement_set()
    statements.add_insert("counts", events.group_by(col("k")).select(col("k"), col("v").count))
    totals = col("v").max if edited else col("v").sum  # the edited statement
    statements.add_insert("totals", events.group_by(col("k")).select(col("k"), totals))
    return statements.execute().get_job_client()


def _changes(out: str, sink: str) -> list[str]:
    """The changes a print sink wrote (``counts> +I[a, 1]`` or ``counts:2> ...``)."""
    return [line.split("> ", 1)[1] for line in out.splitlines() if line.startswith(sink)]


def test_editing_one_statement_restores_the_others_state(tmp_path: Any, capfd: Any) -> None:
    conf = {
        "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
        "execution.checkpointing.interval": "1 s",
    }
    client = _job(1, conf, edited=False)
    seen = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until every key counted a few rows in both
        seen += capfd.readouterr().out
        counted = {c[3] for c in _changes(seen, "counts") if c.startswith("+U")}
        if counted >= set(KEYS) and len(_changes(seen, "totals")) > 12:
            break
        time.sleep(0.05)
    savepoint = client.stop_with_savepoint(savepoint_directory=(tmp_path / "sp").as_uri())
    location = savepoint.result(timeout=60)
    capfd.readouterr()

    restored = {
        **conf,
        "execution.savepoint.path": location,
        "execution.savepoint.ignore-unclaimed-state": "true",
    }
    again = _job(2, restored, edited=True)
    after = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        after += capfd.readouterr().out
        firsts_counts = _first_change_per_key(_changes(after, "counts"))
        firsts_totals = _first_change_per_key(_changes(after, "totals"))
        if len(firsts_counts) == 3 and len(firsts_totals) == 3:
            break
        time.sleep(0.05)
    again.cancel()
    # the untouched statement goes on counting from its restored state: -U/+U, never +I
    assert {kind for kind, _ in firsts_counts.values()} == {"-U"}, firsts_counts
    assert all(n > 1 for _, n in firsts_counts.values())
    # the edited statement (max instead of sum) has a new uid: it starts from nothing
    assert {kind for kind, _ in firsts_totals.values()} == {"+I"}, firsts_totals


def _first_change_per_key(changes: list[str]) -> dict[str, tuple[str, int]]:
    firsts: dict[str, tuple[str, int]] = {}
    for change in changes:
        kind, body = change[:2], change[3:-1]
        key, n = body.split(", ")
        firsts.setdefault(key, (kind, int(n)))
    return firsts


def _counting(parallelism: int, conf: dict[str, str]) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess", **conf})
    env.set_parallelism(parallelism)
    row = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()])
    source = DataGeneratorSource(_event, 1_000_000, RateLimiterStrategy.per_second(500), row)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "events", row).uid("events")
    events = StreamTableEnvironment.create(env).from_data_stream(ds)
    return events.group_by(col("k")).select(col("k"), col("v").count.alias("n")).execute()


def test_a_collected_changelog_restored_from_a_savepoint_goes_on_from_it(tmp_path: Any) -> None:
    """The restored job's client gets the restored job's changes only: the savepoint's run
    delivered the rows up to it, so each key goes on with a ``-U`` of the row it ended with
    (not the savepoint's last interval again)."""
    conf = {
        "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
        "execution.checkpointing.interval": "200 ms",
    }
    first = _counting(1, conf)
    view: dict[str, int] = {}
    stop = None
    for row in first.collect():
        if row.get_row_kind().short_string() in ("+I", "+U"):
            view[row.k] = row.n
        if stop is None and sum(view.values()) >= 150:
            stop = first.get_job_client().stop_with_savepoint(
                savepoint_directory=(tmp_path / "sp").as_uri()
            )
    assert stop is not None
    location = stop.result(timeout=60)

    second = _counting(2, {**conf, "execution.savepoint.path": location})
    firsts: dict[str, tuple[str, int]] = {}
    for row in second.collect():
        firsts.setdefault(row.k, (row.get_row_kind().short_string(), row.n))
        if len(firsts) == len(KEYS):
            break
    second.get_job_client().cancel()
    assert firsts == {k: ("-U", n) for k, n in view.items()}
