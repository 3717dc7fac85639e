"""The sequence job of the exactly-once tests with an Iceberg sink, and what a run left in
its table (read back with pyiceberg)."""

from __future__ import annotations

import itertools
from typing import Any

from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.iceberg import IcebergSink
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration.jobs import checkpointed_env, sequence_source

ROW = Types.ROW_NAMED(["k", "seq", "total"], [Types.STRING(), Types.LONG(), Types.LONG()])
_tables = itertools.count()


def sqlite_catalog(directory: str) -> dict[str, str]:
    """A SQL catalog on SQLite with its warehouse on local files, under ``directory``."""
    return {"type": "sql", "uri": f"sqlite:///{directory}/catalog.db", "warehouse": directory}


def new_table() -> str:
    return f"seq.out_{next(_tables)}"


def _to_row(line: str) -> tuple[str, int, int]:
    key, seq, total = line.split(",")
    return key, int(seq), int(total)


def iceberg_sequence_job(
    conf: dict[str, str],
    catalog: dict[str, str],
    table: str,
    *,
    records: int,
    keys: int,
    rate: int | None = 40_000,
    parallelism: int = 2,
) -> StreamExecutionEnvironment:
    """Generator of per-key sequences -> keyed sequence check -> Iceberg sink into ``table``
    (created partitioned by ``truncate[5](k)``)."""
    env = checkpointed_env(conf, parallelism=parallelism)
    (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .map(_to_row, output_type=ROW)
        .uid("to-row")
        .sink_to(IcebergSink(table, catalog, ROW, partition_by=["truncate[5](k)"]))
        .uid("iceberg-sink")
    )
    return env


def load(catalog: dict[str, str], table: str) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("cairn", **catalog).load_table(table)


def table_lines(catalog: dict[str, str], table: str) -> list[str]:
    """The table's rows as the file sink's lines (``key,seq,sum``)."""
    rows = load(catalog, table).scan().to_arrow().to_pylist()
    return [f"{r['k']},{r['seq']},{r['total']}" for r in rows]


def committed_checkpoints(catalog: dict[str, str], table: str) -> list[tuple[str, str]]:
    """``(job id, checkpoint id)`` of each snapshot, oldest first."""
    return [
        (
            s.summary.additional_properties.get("flink.job-id", ""),
            s.summary.additional_properties.get("flink.max-committed-checkpoint-id", ""),
        )
        for s in load(catalog, table).snapshots()
    ]
