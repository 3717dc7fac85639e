"""The sequence job of the exactly-once tests with a Delta sink, and what a run left in the
table: its rows as ``key,seq,sum`` lines, and its versions with their checkpoint ids."""

from __future__ import annotations

from typing import Any

from cairn.common import Row, Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.delta import DeltaSink
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration.jobs import checkpointed_env, sequence_source

ROW = Types.ROW_NAMED(["k", "seq", "total"], [Types.STRING(), Types.LONG(), Types.LONG()])


def to_row(line: str) -> Row:
    key, seq, total = line.split(",")
    return Row(k=key, seq=int(seq), total=int(total))


def delta_sequence_job(
    conf: dict[str, str],
    path: str,
    *,
    records: int,
    keys: int,
    rate: int | None = 40_000,
    parallelism: int = 2,
    app_id: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> StreamExecutionEnvironment:
    """Generator of per-key sequences -> keyed sequence check -> Delta sink into ``path``."""
    env = checkpointed_env(conf, parallelism=parallelism)
    builder = DeltaSink.for_row_data(path, ROW)
    if app_id is not None:
        builder = builder.with_app_id(app_id)
    if storage_options is not None:
        builder = builder.with_storage_options(storage_options)
    (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .map(to_row, output_type=ROW)
        .uid("to-row")
        .sink_to(builder.build())
        .uid("delta-sink")
    )
    return env


def seaweed_options(server: Any) -> dict[str, str]:
    """delta-rs's storage options for a ``SeaweedS3`` server (conditional puts: safe)."""
    from cairn.testing.seaweedfs import USER

    return {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": USER.access_key,
        "AWS_SECRET_ACCESS_KEY": USER.secret_key,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "conditional_put": "etag",
    }


def table_lines(path: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """The table's current rows as ``key,seq,sum`` lines (unordered: compare counted)."""
    from deltalake import DeltaTable

    t = DeltaTable(path, storage_options=storage_options).to_pyarrow_table()
    cols = [t.column(n).to_pylist() for n in ("k", "seq", "total")]
    return [f"{k},{s},{n}" for k, s, n in zip(*cols, strict=True)]


def checkpoint_versions(path: str) -> list[str]:
    """The ``cairn.checkpoint`` of every write version, oldest first (one per checkpoint)."""
    from deltalake import DeltaTable

    history = DeltaTable(path).history()
    return [h["cairn.checkpoint"] for h in reversed(history) if "cairn.checkpoint" in h]


def staged_leftovers(path: str) -> list[str]:
    """Files left in the sink's staging folder (changelog files not yet applied)."""
    import os

    found = []
    for root, _dirs, files in os.walk(os.path.join(path, "_cairn_staging")):
        found += [os.path.join(root, f) for f in files]
    return found


def unreferenced_data_files(path: str) -> list[str]:
    """Parquet files in the table's folder that its current version does not refer to."""
    import os

    from deltalake import DeltaTable

    from cairn.datastream.connectors.delta import table_file_paths

    referenced = set(table_file_paths(DeltaTable(path)))
    return sorted(f for f in os.listdir(path) if f.endswith(".parquet") and f not in referenced)
