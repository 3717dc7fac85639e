"""Running totals per key, written exactly once into PostgreSQL through ``JdbcSink``.

Invariant: the table ends with one row per input record — ``(key, seq, total)`` with each
key's ``seq`` 1, 2, 3, ... and ``total`` the running sum of its values — even when a worker
is killed while the job runs (``--kill``): the rows of a checkpoint become visible together
when it completes, and what a failed attempt had prepared is rolled back and replayed.

Against your database (the table is created if missing)::

    pip install 'cairn[postgres]'
    python examples/postgres_running_totals.py --url jdbc:postgresql://127.0.0.1:5432/shop \\
        --user cairn --password secret --kill

Without ``--url`` it starts a throw-away PostgreSQL on 127.0.0.1 (Debian's ``postgresql``
binaries; ``cairn.testing.postgres``) and removes it afterwards. The server needs
``max_prepared_transactions`` >= 4 for this job (2 subtasks). Prints the check at the end::

    rows: 200000, keys: 100, duplicates: 0, gaps: 0, wrong totals: 0 -> EXACTLY ONCE
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.datastream.state import ValueStateDescriptor

TABLE = "cairn_running_totals"
ROW = Types.ROW_NAMED(["k", "seq", "total"], [Types.STRING(), Types.LONG(), Types.LONG()])


class Numbers:
    """Record ``i``: key ``k<i mod keys>`` and value ``i // keys + 1`` (1, 2, 3, ... per key)."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, i: int) -> tuple[str, int]:
        return f"k{i % self.keys:03d}", i // self.keys + 1


class RunningTotal(KeyedProcessFunction[str, tuple[str, int], tuple[str, int, int]]):
    """Seed 002's keyed sum, emitting ``(key, value, running total)``."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[Any]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], value[1], total


def build(
    env: StreamExecutionEnvironment, connection: JdbcConnectionOptions, records: int, keys: int
) -> None:
    env.enable_checkpointing(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))
    source = DataGeneratorSource(Numbers(keys), records, RateLimiterStrategy.per_second(40_000))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .uid("numbers")
        .key_by(lambda r: r[0])
        .process(RunningTotal(), output_type=ROW)
        .uid("running-total")
        .add_sink(
            JdbcSink.exactly_once_sink(
                f"INSERT INTO {TABLE} (k, seq, total) VALUES (?, ?, ?)",
                ROW,
                connection,
                JdbcExecutionOptions.builder().with_batch_size(1000).build(),
            )
        )
        .uid("postgres")
    )


def check(conn: Any, records: int, keys: int) -> bool:
    """Count what the table holds against what the input makes, and print it."""
    rows, distinct, gaps, wrong = conn.execute(
        f"""SELECT count(*), count(DISTINCT (k, seq)),
                   count(*) FILTER (WHERE seq <> rank),
                   count(*) FILTER (WHERE total <> seq * (seq + 1) / 2)
            FROM (SELECT k, seq, total, row_number() OVER (PARTITION BY k ORDER BY id) AS rank
                  FROM {TABLE}) AS t"""
    ).fetchone()
    ok = rows == records and distinct == rows and gaps == 0 and wrong == 0
    n_keys = conn.execute(f"SELECT count(DISTINCT k) FROM {TABLE}").fetchone()[0]
    print(
        f"rows: {rows}, keys: {n_keys}, duplicates: {rows - distinct}, gaps: {gaps}, "
        f"wrong totals: {wrong} -> {'EXACTLY ONCE' if ok and n_keys == keys else 'VIOLATED'}"
    )
    return ok and n_keys == keys


def kill_a_worker_mid_run(client: Any) -> None:
    """SIGKILL one Spark worker once a checkpoint completed (the job then recovers)."""
    master = client.job_master
    while not (view := master.view).ended:  # one consistent snapshot of the job
        latest, pids = view.latest_checkpoint_id, view.worker_pids
        if latest is not None and latest >= 1 and pids:
            os.kill(pids[max(pids)], signal.SIGKILL)
            print(f"killed a worker after checkpoint {latest}", flush=True)
            return
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", help="jdbc:postgresql://host:port/database (default: a throw-away server)"
    )
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--kill", action="store_true", help="SIGKILL a worker mid-run (Spark)")
    args = parser.parse_args(argv)
    import psycopg

    with contextlib.ExitStack() as stack:
        if args.url is None:
            from cairn.testing.postgres import PostgresServer

            server = stack.enter_context(PostgresServer())
            args.url, args.user, args.password = server.jdbc_url(), server.user, server.password
        connection = (
            JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url(args.url)
            .with_driver_name("org.postgresql.Driver")
            .with_user_name(args.user)
            .with_password(args.password)
            .build()
        )
        conninfo = args.url.removeprefix("jdbc:")
        with psycopg.connect(
            conninfo, user=args.user, password=args.password, autocommit=True
        ) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(
                f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, k text, seq bigint, total bigint)"
            )
            env = StreamExecutionEnvironment.get_execution_environment()
            env.set_parallelism(2)
            build(env, connection, args.records, args.keys)
            client = env.execute_async("postgres-running-totals")
            if args.kill:
                kill_a_worker_mid_run(client)
            client.get_job_execution_result()
            print(f"restarts: {client.job_master.restarts}")
            return 0 if check(conn, args.records, args.keys) else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
