"""The ``jdbc-sink`` measurement: rows per second into PostgreSQL through the JDBC sinks'
writers, without the engine, against psycopg alone on the same server.

One run starts a throw-away PostgreSQL (``cairn.testing.postgres``), then, into a fresh table
each, writes ``rows`` rows ``(key, seq, total)``: ``psycopg-executemany`` (psycopg's
``executemany`` of ``batch_size`` rows per transaction, what a hand-written sink does),
``psycopg-copy`` (psycopg's ``COPY`` of the same batches: the floor), ``at-least-once``
(``JdbcSink.sink``'s writer, flushed every ``checkpoint_every`` rows as at a barrier) and
``exactly-once`` (``exactly_once_sink``'s writer: the transaction prepared every
``checkpoint_every`` rows and committed right after, as when the checkpoint completes).
Reported per variant: rows/s of wall time, CPU µs per row of this process (the server's CPU
is not in it), and the rows counted in the table afterwards (each must equal ``rows``).
Variants alternate ``repeat`` times: compare them as ratios within one run.

Invariant: prints one JSON object as its last stdout line, like every other measurement of
``bench``; the server and its data are gone when it returns.

    python -m bench.jdbc_sink --rows 200000 --batch-size 5000 --checkpoint-every 40000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from cairn.common import Types
from cairn.datastream.connectors.base import SinkWriterContext
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.testing.postgres import PostgresServer

__all__ = ["measure"]

ROW = Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()])
VARIANTS = ("psycopg-executemany", "psycopg-copy", "at-least-once", "exactly-once")


def _rows(n: int) -> list[tuple[str, int, int]]:
    return [(f"k{i % 10_000:05d}", i // 10_000 + 1, i) for i in range(n)]


def _table(pg: Any, name: str) -> str:
    with pg.connect() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(
            f"CREATE TABLE {name} (id bigserial PRIMARY KEY, k text, seq bigint, n bigint)"
        )
    return name


def _count(pg: Any, table: str) -> int:
    with pg.connect() as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _psycopg(pg: Any, table: str, rows: list[Any], batch: int, every: int) -> None:
    import psycopg

    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        sql = f"INSERT INTO {table} (k, seq, n) VALUES (%s, %s, %s)"
        for i in range(0, len(rows), batch):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(sql, rows[i : i + batch])


def _psycopg_copy(pg: Any, table: str, rows: list[Any], batch: int, every: int) -> None:
    import psycopg

    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        for i in range(0, len(rows), batch):
            with (
                conn.transaction(),
                conn.cursor() as cur,
                cur.copy(f"COPY {table} (k, seq, n) FROM STDIN") as copy,
            ):
                for row in rows[i : i + batch]:
                    copy.write_row(row)


def _sink_writer(exactly_once: bool) -> Callable[[Any, str, list[Any], int, int], None]:
    def run(pg: Any, table: str, rows: list[Any], batch: int, every: int) -> None:
        connection = (
            JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url(pg.jdbc_url())
            .with_user_name(pg.user)
            .with_password(pg.password)
            .build()
        )
        sql = f"INSERT INTO {table} (k, seq, n) VALUES (?, ?, ?)"
        execution = JdbcExecutionOptions.builder().with_batch_size(batch).build()
        make = JdbcSink.exactly_once_sink if exactly_once else JdbcSink.sink
        sink = make(sql, ROW, connection, execution)
        context = SinkWriterContext(0, 1, 0, "bench")
        writer = sink.create_writer(context, [])
        committer = sink.create_committer()
        checkpoint = since = 0
        for i in range(0, len(rows), 1024):  # the engine hands the sink batches of 1024
            chunk = rows[i : i + 1024]
            writer.write_batch(chunk)
            since += len(chunk)
            if since >= every or i + 1024 >= len(rows):  # a barrier, then its completion
                checkpoint, since = checkpoint + 1, 0
                writer.flush(False)
                if committer is not None:
                    committer.commit(writer.prepare_commit(checkpoint))
        writer.close()
        if committer is not None:
            committer.close()

    return run


def measure(
    rows: int, batch_size: int = 5000, checkpoint_every: int = 40_000, repeat: int = 3
) -> dict[str, Any]:
    """Write ``rows`` rows with each variant ``repeat`` times, alternating (see the module
    docstring), e.g. ``measure(2000, 500, 1000, repeat=1)["rows_checked"]`` is ``True``."""
    if rows < 1 or batch_size < 1 or checkpoint_every < 1 or repeat < 1:
        raise ValueError("rows, batch_size, checkpoint_every and repeat must be positive")
    data = _rows(rows)
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    checked = True
    variants: dict[str, Callable[[Any, str, list[Any], int, int], None]] = {
        "psycopg-executemany": _psycopg,
        "psycopg-copy": _psycopg_copy,
        "at-least-once": _sink_writer(False),
        "exactly-once": _sink_writer(True),
    }
    with PostgresServer() as pg:
        for r in range(repeat):
            for name, run in variants.items():
                table = _table(pg, f"bench_{name.replace('-', '_')}_{r}")
                wall, cpu = time.perf_counter(), time.process_time()
                run(pg, table, data, batch_size, checkpoint_every)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                runs[name].append((wall, cpu))
                checked = checked and _count(pg, table) == rows
    result: dict[str, Any] = {
        "rows": rows,
        "batch_size": batch_size,
        "checkpoint_every": checkpoint_every,
        "repeat": repeat,
        "rows_checked": checked,
    }
    for name, measured in runs.items():
        key = name.replace("-", "_")
        result[f"{key}_rows_per_s"] = round(statistics.median(rows / w for w, _ in measured))
        result[f"{key}_cpu_us_per_row"] = round(
            statistics.median(c / rows * 1e6 for _, c in measured), 2
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.jdbc_sink", description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--checkpoint-every", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.rows, args.batch_size, args.checkpoint_every, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
