"""The Iceberg sink's upsert mode: a keyed changelog applied copy-on-write, one snapshot per
checkpoint.

Invariant: a checkpoint's changes (staged by the writers as Parquet files under the table's
``cairn-staging/``, ``-U`` rows dropped) are reduced to the last one per key (the same rule
as the Delta sink's MERGE, ``delta_merge``), and committed as ONE ``overwrite`` snapshot
that deletes every live data file holding one of those keys, adds those files' other rows
rewritten, and adds the rows of the keys' last ``+I``/``+U`` — so a key has at most one row,
its latest. The snapshot records the job and checkpoint as an append does
(``iceberg_commit``): a replay finds it and commits nothing. Copy-on-write rather than
equality delete files: pyiceberg 0.12 cannot read equality deletes, and readers (Spark's
Parquet reader too) see plain data files. A commit that lost a race (the job is the only
writer of its keys; a compaction may have rewritten a file meanwhile) is planned again on
the new head.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cairn.datastream.connectors.delta_merge import DELETE_COLUMN, last_change_per_key
from cairn.datastream.connectors.iceberg_commit import snapshot_properties
from cairn.datastream.connectors.iceberg_table import TableAccess

__all__ = [
    "STAGING_DIR",
    "apply_changes",
    "delete_staged",
    "key_mask",
    "staging_path",
    "write_staged",
]

log = logging.getLogger(__name__)

STAGING_DIR = "cairn-staging"
_ATTEMPTS = 5


def staging_path(location: str, write_uuid: uuid.UUID, subtask: int, seq: int) -> str:
    """Where a writer stages a changelog file.

    >>> staging_path("file:///wh/db/t", uuid.UUID(int=1), 2, 7)
    'file:///wh/db/t/cairn-staging/00000000-0000-0000-0000-000000000001-s2-7.parquet'
    """
    return f"{location.rstrip('/')}/{STAGING_DIR}/{write_uuid}-s{subtask}-{seq}.parquet"


def key_mask(rows: pa.Table, keys: Sequence[str], wanted: set[tuple[Any, ...]]) -> pa.Array:
    """Which of ``rows`` have a key (the columns ``keys``, as a tuple) in ``wanted``.

    >>> key_mask(pa.table({"k": ["a", "b", "c"]}), ["k"], {("a",), ("c",)}).to_pylist()
    [True, False, True]
    >>> t = pa.table({"k": ["a", "a"], "j": [1, 2]})
    >>> key_mask(t, ["k", "j"], {("a", 2)}).to_pylist()
    [False, True]
    """
    if len(keys) == 1:
        values = pa.array([w[0] for w in wanted], rows.schema.field(keys[0]).type)
        return pc.is_in(rows.column(keys[0]), value_set=values)
    columns = [rows.column(k).to_pylist() for k in keys]
    return pa.array([tuple(v) in wanted for v in zip(*columns, strict=True)], pa.bool_())


def write_staged(access: TableAccess, changes: pa.Table, path: str) -> None:
    """Stage a writer's changes (with their delete flags) at ``path``."""
    import pyarrow.parquet as pq

    with access.table().io.new_output(path).create(overwrite=True) as stream:
        pq.write_table(changes, stream)


def delete_staged(access: TableAccess, paths: Sequence[str]) -> None:
    io = access.table().io
    for path in paths:
        try:
            io.delete(path)
        except Exception:
            log.warning("Iceberg sink: could not delete staged changes %s", path)


def _read_staged(access: TableAccess, paths: Sequence[str]) -> pa.Table:
    import pyarrow.parquet as pq

    io = access.table().io
    parts = []
    for path in paths:
        with io.new_input(path).open() as stream:
            parts.append(pq.read_table(stream))
    return pa.concat_tables(parts)


def apply_changes(
    access: TableAccess, job_id: str, checkpoint_id: int, staged: Sequence[str]
) -> bool:
    """Apply a checkpoint's staged changes as one snapshot (see the module), unless the
    table already holds the checkpoint; whether it committed."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    keys = list(access.config.equality_fields)
    changes = None
    for attempt in range(_ATTEMPTS):
        if not staged or not access.needs_commit(job_id, checkpoint_id):
            return False  # (a replay: its staged files may be gone already)
        if changes is None:
            changes = last_change_per_key(_read_staged(access, staged), keys)
        table = access.table()
        removed, added = _rewrite(access, table, changes, keys)
        transaction = table.transaction()
        properties = snapshot_properties(job_id, checkpoint_id)
        with transaction.update_snapshot(snapshot_properties=properties).overwrite() as o:
            for data_file in removed:
                o.delete_data_file(data_file)
            for data_file in added:
                o.append_data_file(data_file)
        try:
            transaction.commit_transaction()
            return True
        except (CommitFailedException, ValidationException):
            for data_file in added:
                table.io.delete(data_file.file_path)
            if attempt == _ATTEMPTS - 1:
                raise
            log.info("Iceberg sink: checkpoint %s lost a commit race, again", checkpoint_id)
    raise AssertionError("unreachable")


def _rewrite(
    access: TableAccess, table: Any, changes: pa.Table, keys: list[str]
) -> tuple[list[Any], list[Any]]:
    """The live files holding a changed key (to delete) and the files to add: their other
    rows, and the changed keys' new rows."""
    from pyiceberg.expressions import AlwaysTrue, And, In
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import FileScanTask

    wanted = set(zip(*(changes.column(k).to_pylist() for k in keys), strict=True))
    write_uuid, counter = uuid.uuid4(), itertools.count(0)
    removed, added = [], []
    if table.current_snapshot() is not None:
        in_: Any = In  # a pydantic model whose __new__ mypy does not see
        filters = [in_(k, set(changes.column(k).to_pylist())) for k in keys]
        row_filter = filters[0] if len(filters) == 1 else And(*filters)
        scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
        for task in table.scan(row_filter=row_filter).plan_files():
            rows = scan.to_table([FileScanTask(task.file)])
            hit = key_mask(rows, keys, wanted)
            if not pc.any(hit).as_py():
                continue
            removed.append(task.file)
            kept = rows.filter(pc.invert(hit))
            if kept.num_rows:
                added += access.write_files(kept, write_uuid, counter)
    upserts = changes.filter(pc.invert(changes.column(DELETE_COLUMN)))
    upserts = upserts.drop_columns([DELETE_COLUMN])
    if upserts.num_rows:
        added += access.write_files(upserts, write_uuid, counter)
    return removed, added
