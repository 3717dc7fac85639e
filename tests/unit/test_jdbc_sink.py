"""The JDBC sinks against a real PostgreSQL server: PyFlink's API, batches and retries of
the at-least-once sink, and the exactly-once sink's prepared transactions (invisible until
committed, commit replayable, leftovers of other attempts rolled back, clear errors)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from cairn.common import Row, Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors import JdbcSink as ReExported
from cairn.datastream.connectors.base import SinkWriterContext, commits_on_checkpoints
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.datastream.connectors.jdbc_postgres import JdbcSinkError, JdbcTransaction
from cairn.testing.processes import wait_for

pytestmark = pytest.mark.postgres

ROW = Types.ROW([Types.STRING(), Types.LONG()])
INSERT = "INSERT INTO {table} (word, n) VALUES (?, ?)"
_tables = itertools.count()


@pytest.fixture
def table(postgres: Any) -> str:
    name = f"words_{next(_tables)}"
    with postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {name} (id bigserial PRIMARY KEY, word text, n bigint)")
    return name


def options(pg: Any, password: str | None = None) -> JdbcConnectionOptions:
    return (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(pg.jdbc_url())
        .with_driver_name("org.postgresql.Driver")
        .with_user_name(pg.user)
        .with_password(password or pg.password)
        .build()
    )


def rows(pg: Any, table: str) -> list[tuple[str, int]]:
    with pg.connect() as conn:
        return [tuple(r) for r in conn.execute(f"SELECT word, n FROM {table} ORDER BY id")]


def prepared(pg: Any) -> list[str]:
    with pg.connect() as conn:
        return sorted(g for (g,) in conn.execute("SELECT gid FROM pg_prepared_xacts"))


def context(subtask: int = 0, attempt: int = 0, job: str = "job1") -> SinkWriterContext:
    return SinkWriterContext(subtask, 2, attempt, job)


# ---- API ----------------------------------------------------------------------------------


def test_pyflink_names_and_defaults() -> None:
    assert ReExported is JdbcSink
    e = JdbcExecutionOptions.builder().with_batch_size(10).with_batch_interval_ms(5).build()
    assert (e.get_batch_size(), e.get_batch_interval_ms(), e.get_max_retries()) == (10, 5, 3)
    d = JdbcExecutionOptions.defaults()
    assert (d.get_batch_size(), d.get_batch_interval_ms(), d.get_max_retries()) == (5000, 0, 3)
    x = JdbcExactlyOnceOptions.builder().with_max_commit_attempts(5).build()
    assert x.max_commit_attempts == 5 and x.recovered_and_rollback
    with pytest.raises(ValueError, match="max_commit_attempts"):
        JdbcExactlyOnceOptions.builder().with_max_commit_attempts(0).build()


def test_plain_sink_is_not_two_phase_and_the_exactly_once_one_is(postgres: Any) -> None:
    plain = JdbcSink.sink(INSERT.format(table="t"), ROW, options(postgres))
    once = JdbcSink.exactly_once_sink(INSERT.format(table="t"), ROW, options(postgres))
    assert not commits_on_checkpoints(plain)
    assert commits_on_checkpoints(once)


def test_add_sink_takes_a_jdbc_sink_as_pyflink_does(postgres: Any) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection([("a", 1)], type_info=ROW)
    sink = stream.add_sink(JdbcSink.sink(INSERT.format(table="t"), ROW, options(postgres)))
    assert sink is not None


def test_misconfigurations_fail_when_the_sink_is_made() -> None:
    pg_url = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(
        "jdbc:postgresql://127.0.0.1:1/db"
    )
    with pytest.raises(ValueError, match=r"2 placeholders but its row type .* has 3 fields"):
        JdbcSink.sink(
            "INSERT INTO t VALUES (?, ?)",
            Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()]),
            pg_url.build(),
        )
    with pytest.raises(ValueError, match="PostgreSQL only"):
        JdbcSink.sink(
            "INSERT INTO t VALUES (?)",
            None,
            JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url("jdbc:mysql://h/db")
            .build(),
        )
    mysql_driver = pg_url.with_driver_name("com.mysql.cj.jdbc.Driver").build()
    with pytest.raises(ValueError, match=r"PostgreSQL only .*com\.mysql\.cj\.jdbc\.Driver"):
        JdbcSink.sink("INSERT INTO t VALUES (?)", None, mysql_driver)
    with pytest.raises(ValueError, match="need a URL"):
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder().build()
    with pytest.raises(ValueError, match="transaction_id_prefix"):
        JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("a:b").build()


# ---- at least once ----------------------------------------------------------------------


def test_batches_become_visible_when_full_and_at_each_flush(postgres: Any, table: str) -> None:
    execution = JdbcExecutionOptions.builder().with_batch_size(3).build()
    sink = JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres), execution)
    writer = sink.create_writer(context(), [])
    writer.write_batch([("a", 1), Row("b", 2)])
    assert rows(postgres, table) == []  # not full yet
    writer.write(["c", 3])
    assert rows(postgres, table) == [("a", 1), ("b", 2), ("c", 3)]
    writer.write(("d", 4))
    writer.flush(False)  # the checkpoint barrier
    assert rows(postgres, table)[-1] == ("d", 4)
    writer.close()


def test_a_lost_connection_is_retried_on_a_new_one(postgres: Any, table: str) -> None:
    sink = JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres))
    writer = sink.create_writer(context(), [])
    with postgres.connect() as admin:  # the server ends the writer's session
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'cairn-jdbc-sink'"
        )
    writer.write_batch([("a", 1), ("b", 2)])
    writer.flush(False)
    assert rows(postgres, table) == [("a", 1), ("b", 2)]
    writer.close()


def test_a_failing_statement_names_itself_and_the_servers_words(postgres: Any) -> None:
    sink = JdbcSink.sink(INSERT.format(table="no_such_table"), ROW, options(postgres))
    writer = sink.create_writer(context(), [])
    writer.write(("a", 1))
    with pytest.raises(JdbcSinkError) as info:
        writer.flush(False)
    message = str(info.value)
    assert "no_such_table" in message and "does not exist" in message
    assert postgres.password not in message
    writer.close()


def test_a_record_of_the_wrong_shape_is_named(postgres: Any, table: str) -> None:
    sink = JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres))
    writer = sink.create_writer(context(), [])
    with pytest.raises(ValueError, match=r"takes 2 parameters, the record has 3: \('a', 1, 2\)"):
        writer.write(("a", 1, 2))
    writer.close()


def test_a_wrong_password_is_refused_without_showing_it(postgres: Any, table: str) -> None:
    sink = JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres, "not-it"))
    with pytest.raises(JdbcSinkError, match=r"cannot connect to postgresql://127\.0\.0\.1") as info:
        sink.create_writer(context(), [])
    assert "password authentication failed" in str(info.value)
    assert "not-it" not in str(info.value)


# ---- exactly once -----------------------------------------------------------------------


def exactly_once(pg: Any, table: str, prefix: str | None = None) -> Any:
    eo = JdbcExactlyOnceOptions.builder()
    if prefix:
        eo = eo.with_transaction_id_prefix(prefix)
    execution = JdbcExecutionOptions.builder().with_batch_size(2).build()
    return JdbcSink.exactly_once_sink(
        INSERT.format(table=table), ROW, options(pg), execution, eo.build()
    )


def test_rows_are_invisible_until_the_checkpoint_commits(postgres: Any, table: str) -> None:
    sink = exactly_once(postgres, table, "inv")
    writer, committer = sink.create_writer(context(), []), sink.create_committer()
    writer.write_batch([("a", 1), ("b", 2), ("c", 3)])  # a full batch went to the server
    assert rows(postgres, table) == []
    assert writer.prepare_commit(1) == [JdbcTransaction("cairn:inv:job1:0:0:0")]
    assert prepared(postgres) == ["cairn:inv:job1:0:0:0"] and rows(postgres, table) == []
    assert writer.prepare_commit(2) == []  # nothing since: no empty transaction
    writer.write(("d", 4))
    [second] = writer.prepare_commit(3)
    committer.commit([JdbcTransaction("cairn:inv:job1:0:0:0")])
    assert rows(postgres, table) == [("a", 1), ("b", 2), ("c", 3)]
    committer.commit([JdbcTransaction("cairn:inv:job1:0:0:0"), second])  # replayed: no error
    assert rows(postgres, table) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert prepared(postgres) == []
    writer.close()
    committer.close()


def test_leftovers_of_other_attempts_are_rolled_back_and_the_current_ones_kept(
    postgres: Any, table: str
) -> None:
    sink = exactly_once(postgres, table, "left")
    old = sink.create_writer(context(subtask=1, attempt=0), [])
    old.write(("lost", 1))
    [old_txn] = old.prepare_commit(5)  # prepared, never in a completed checkpoint
    other_run = sink.create_writer(context(subtask=0, attempt=0, job="job0"), [])
    other_run.write(("earlier run", 1))
    other_run.prepare_commit(9)
    unrelated = exactly_once(postgres, table, "other").create_writer(context(), [])
    unrelated.write(("another sink", 1))
    [unrelated_txn] = unrelated.prepare_commit(1)
    current = sink.create_writer(context(subtask=1, attempt=1), [])
    current.write(("new", 2))
    [current_txn] = current.prepare_commit(6)

    committer = sink.create_committer()
    committer.abort_leftovers(context(subtask=0, attempt=1))
    assert prepared(postgres) == sorted([current_txn.gid, unrelated_txn.gid])
    committer.commit([old_txn])  # gone: counts as done, never resurrected
    committer.commit([current_txn])
    assert rows(postgres, table) == [("new", 2)]
    exactly_once(postgres, table, "other").create_committer().commit([unrelated_txn])
    for w in (old, other_run, unrelated, current):
        w.close()
    committer.close()


def test_an_unprepared_transaction_is_rolled_back_on_close(postgres: Any, table: str) -> None:
    sink = exactly_once(postgres, table, "close")
    writer = sink.create_writer(context(), [])
    writer.write_batch([("a", 1), ("b", 2)])
    writer.close()
    assert rows(postgres, table) == [] and prepared(postgres) == []


def test_a_server_without_prepared_transactions_is_a_clear_error(table: str) -> None:
    from cairn.testing.postgres import PostgresServer

    with PostgresServer(max_prepared_transactions=0) as pg:
        with pg.connect() as conn:
            conn.execute(f"CREATE TABLE {table} (id bigserial, word text, n bigint)")
        sink = exactly_once(pg, table)
        with pytest.raises(JdbcSinkError, match="max_prepared_transactions = 0"):
            sink.create_writer(context(), [])


UPSERT = (
    "INSERT INTO {table} (word, n) VALUES (?, ?)"
    " ON CONFLICT (word) DO UPDATE SET n = {table}.n + EXCLUDED.n"
)


@pytest.mark.parametrize("exactly", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_statement_other_than_a_plain_insert_runs_as_written(
    postgres: Any, exactly: bool
) -> None:
    """A plain INSERT goes through COPY; anything else (here an upsert that adds up) runs
    statement by statement, each row seeing the ones before it."""
    table = f"totals_{next(_tables)}"
    with postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {table} (word text PRIMARY KEY, n bigint)")
    execution = JdbcExecutionOptions.builder().with_batch_size(2).build()
    make = JdbcSink.exactly_once_sink if exactly else JdbcSink.sink
    sink = make(UPSERT.format(table=table), ROW, options(postgres), execution)
    assert sink.statement.copy is None
    assert JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres)).statement.copy
    writer, committer = sink.create_writer(context(), []), sink.create_committer()
    writer.write_batch([("a", 1), ("b", 10), ("a", 2)])
    writer.flush(False)
    if committer is not None:
        committer.commit(writer.prepare_commit(1))
        committer.close()
    writer.close()
    with postgres.connect() as conn:
        got = dict(conn.execute(f"SELECT word, n FROM {table}").fetchall())
    assert got == {"a": 3, "b": 10}


def test_a_value_the_column_refuses_names_the_row_and_the_statement(
    postgres: Any, table: str
) -> None:
    sink = JdbcSink.sink(INSERT.format(table=table), None, options(postgres))
    writer = sink.create_writer(context(), [])
    writer.write_batch([("a", 1), ("b", "not a number")])
    with pytest.raises(JdbcSinkError) as info:
        writer.flush(False)
    message = str(info.value)
    assert "invalid input syntax for type bigint" in message and "not a number" in message
    assert INSERT.format(table=table).replace("?", "%s") in message
    assert rows(postgres, table) == []  # the batch is one transaction
    writer.close()


def test_a_connection_lost_between_transactions_is_replaced(postgres: Any, table: str) -> None:
    """Nothing is in flight between two checkpoints' transactions: the exactly-once writer
    opens the next one on a new connection instead of failing the job."""
    sink = exactly_once(postgres, table, "lost")
    writer, committer = sink.create_writer(context(), []), sink.create_committer()
    writer.write(("a", 1))
    committer.commit(writer.prepare_commit(1))
    with postgres.connect() as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'cairn-jdbc-sink' AND pid <> pg_backend_pid()"
        )
    writer.write_batch([("b", 2), ("c", 3)])
    committer.commit(writer.prepare_commit(2))
    assert rows(postgres, table) == [("a", 1), ("b", 2), ("c", 3)]
    writer.close()
    committer.close()


def test_the_batch_interval_sends_rows_while_no_new_record_arrives(
    postgres: Any, table: str
) -> None:
    """Flink's batch interval: a batch far from full is sent once it is that old, by the
    task's timer, with no checkpoint, no new record and no end of input (in-process)."""
    import time

    from cairn.common import Configuration
    from cairn.datastream import SourceFunction

    class ThreeThenQuiet(SourceFunction):
        def __init__(self) -> None:
            self.running = True

        def run(self, ctx: Any) -> None:
            for i in range(3):
                ctx.collect(("w", i))
            while self.running:
                time.sleep(0.02)

        def cancel(self) -> None:
            self.running = False

    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    execution = JdbcExecutionOptions.builder().with_batch_interval_ms(200).build()
    env.add_source(ThreeThenQuiet()).map(lambda r: r, output_type=ROW).add_sink(
        JdbcSink.sink(INSERT.format(table=table), ROW, options(postgres), execution)
    )
    client = env.execute_async("batch-interval")
    try:
        wait_for(lambda: len(rows(postgres, table)) >= 3, 20, 0.05, "three rows in the table")
        assert rows(postgres, table) == [("w", 0), ("w", 1), ("w", 2)]
        assert client.job_master.end_ms is None, "the rows must arrive while the job runs"
    finally:
        client.cancel()
