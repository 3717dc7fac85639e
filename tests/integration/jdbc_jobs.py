"""The sequence job of the exactly-once tests with a JDBC sink into PostgreSQL, and what a
run left in its table."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration.jobs import checkpointed_env, sequence_source

ROW = Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()])
_tables = itertools.count()


def new_table(pg: Any) -> str:
    """A fresh output table: an id in insertion order, then key, sequence number, sum."""
    name = f"sequence_out_{next(_tables)}"
    with pg.connect() as conn:
        conn.execute(
            f"CREATE TABLE {name} (id bigserial PRIMARY KEY, k text, seq bigint, total bigint)"
        )
    return name


def to_row(line: str) -> tuple[str, int, int]:
    key, seq, total = line.split(",")
    return key, int(seq), int(total)


def jdbc_sequence_job(
    conf: dict[str, str],
    pg: Any,
    table: str,
    *,
    records: int,
    keys: int,
    exactly_once: bool = True,
    rate: int | None = 40_000,
    mode: Any = None,
    parallelism: int = 2,
) -> StreamExecutionEnvironment:
    """Generator of per-key sequences -> keyed sequence check -> JDBC sink into ``table``."""
    env = checkpointed_env(conf, mode=mode, parallelism=parallelism)
    connection = (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(pg.jdbc_url())
        .with_driver_name("org.postgresql.Driver")
        .with_user_name(pg.user)
        .with_password(pg.password)
        .build()
    )
    sql = f"INSERT INTO {table} (k, seq, total) VALUES (?, ?, ?)"
    execution = JdbcExecutionOptions.builder().with_batch_size(500).build()
    make = JdbcSink.exactly_once_sink if exactly_once else JdbcSink.sink
    (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .map(to_row, output_type=ROW)
        .uid("to-row")
        .add_sink(make(sql, ROW, connection, execution))
        .uid("jdbc-sink")
    )
    return env


def table_lines(pg: Any, table: str) -> list[str]:
    """The table's rows as the file sink's lines (``key,seq,sum``), in insertion order."""
    with pg.connect() as conn:
        rows = conn.execute(f"SELECT k, seq, total FROM {table} ORDER BY id").fetchall()
    return [f"{k},{seq},{total}" for k, seq, total in rows]


def out_of_order_keys(lines: list[str]) -> list[str]:
    """Keys whose sequence numbers, in insertion order, are not 1, 2, 3, ..."""
    per_key: dict[str, list[int]] = defaultdict(list)
    for line in lines:
        key, seq, _ = line.split(",")
        per_key[key].append(int(seq))
    return sorted(k for k, seqs in per_key.items() if seqs != list(range(1, len(seqs) + 1)))


def prepared_transactions(pg: Any) -> list[str]:
    with pg.connect() as conn:
        return [g for (g,) in conn.execute("SELECT gid FROM pg_prepared_xacts")]
