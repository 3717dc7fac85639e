"""The Delta sink's commit protocol as pure decisions: names, what a commit takes, orphans.

Invariant: a checkpoint becomes at most one Delta version. Every writer subtask sends the
descriptions of the data files it closed at a barrier (a ``DeltaWriteResult``) to the sink's
one committer subtask (``Sink.global_committer``), which keeps them in that checkpoint's
state and, when the checkpoint completes, commits them all in one Delta transaction carrying
the ``txn`` action ``(app id, checkpoint id)``, unless the table's transaction version for
the app id has reached the checkpoint already (a replay after a restore). Files of other
attempts that no committed version refers to were never part of a completed checkpoint of
this run: deleted, never committed.

>>> data_file_name("cairn-j1", "j1", 2, 0, 7, 3)
'part-cairn-j1-j1-a2-s0-c7-3.parquet'
>>> needs_commit(table_txn_version=6, checkpoint_id=7), needs_commit(7, 7)
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "STAGING_DIR",
    "DataFile",
    "DeltaWriteResult",
    "attempt_dir",
    "attempt_file_prefix",
    "data_file_name",
    "fsspec_options",
    "needs_commit",
    "orphan_data_files",
    "schema_mismatch",
]

STAGING_DIR = "_cairn_staging"  # changelog files of upserts; Delta readers skip "_" folders


@dataclass(frozen=True)
class DataFile:
    """One closed Parquet file of a writer: the fields of its Delta ``add`` action."""

    path: str  # relative to the table root
    size: int
    modification_time: int  # epoch ms
    num_records: int


@dataclass(frozen=True)
class DeltaWriteResult:
    """A writer's committable: the files it closed at a barrier (or at the end of input),
    in the order it wrote them; with upsert keys they are staged changelog files, applied by
    the committer's MERGE and never added as they are.

    >>> DeltaWriteResult(1, (DataFile("part-x.parquet", 10, 0, 2),)).files[0].num_records
    2
    """

    subtask: int
    files: tuple[DataFile, ...]


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _safe(text: str) -> str:
    return _SAFE.sub("_", text)


def attempt_dir(app_id: str, job_id: str, attempt: int) -> str:
    """The folder of one attempt's staged changelog files, relative to the table root.

    >>> attempt_dir("app/1", "j", 0)
    '_cairn_staging/app_1/j-a0'
    """
    return f"{STAGING_DIR}/{_safe(app_id)}/{_safe(job_id)}-a{attempt}"


def data_file_name(
    app_id: str, job_id: str, attempt: int, subtask: int, checkpoint_id: int, seq: int
) -> str:
    """A data file's name: unique per attempt, recognisable as this app's for cleanup."""
    prefix = attempt_file_prefix(app_id, job_id, attempt)
    return f"{prefix}s{subtask}-c{checkpoint_id}-{seq}.parquet"


def attempt_file_prefix(app_id: str, job_id: str, attempt: int) -> str:
    """What the names of one attempt's data files begin with.

    >>> data_file_name("a", "j", 1, 0, 2, 0).startswith(attempt_file_prefix("a", "j", 1))
    True
    """
    return f"part-{_safe(app_id)}-{_safe(job_id)}-a{attempt}-"


def needs_commit(table_txn_version: int | None, checkpoint_id: int) -> bool:
    """Whether a checkpoint's files still have to be committed: the table's latest
    transaction version for the app id is below it (``None``: the app never committed)."""
    return table_txn_version is None or table_txn_version < checkpoint_id


def orphan_data_files(
    names: Iterable[str], app_id: str, current_prefix: str, in_table: Iterable[str]
) -> list[str]:
    """This app's data files (by name) that the current table version does not reference
    and the current attempt did not write: aborted checkpoints of earlier attempts.

    >>> orphan_data_files(["part-a-j-a0-s0-c1-0.parquet", "part-a-j-a0-s1-c1-0.parquet",
    ...                    "part-a-j-a1-s0-c2-0.parquet", "other.parquet"],
    ...                   "a", "part-a-j-a1-", ["part-a-j-a0-s0-c1-0.parquet"])
    ['part-a-j-a0-s1-c1-0.parquet']
    """
    mine = f"part-{_safe(app_id)}-"
    referenced = set(in_table)
    return sorted(
        n
        for n in names
        if n.startswith(mine)
        and n.endswith(".parquet")
        and not n.startswith(current_prefix)
        and n not in referenced
    )


def schema_mismatch(
    table: Sequence[tuple[str, str]], stream: Sequence[tuple[str, str]], path: str
) -> str | None:
    """A one-line error if an existing table's columns (name, Delta type) differ from the
    stream's, else ``None``.

    >>> schema_mismatch([("k", "string")], [("k", "long")], "/t")
    "Delta table /t has columns (k string), the stream's rows are (k long): not the same schema"
    """
    if list(table) == list(stream):
        return None

    def show(cols: Sequence[tuple[str, str]]) -> str:
        return ", ".join(f"{n} {t}" for n, t in cols)

    return (
        f"Delta table {path} has columns ({show(table)}), the stream's rows are "
        f"({show(stream)}): not the same schema"
    )


def fsspec_options(url: str, storage: dict[str, str]) -> dict[str, object]:
    """fsspec's options for the files the sink writes beside delta-rs, from delta-rs's
    storage options (``AWS_*``; unset ones fall back to the environment, for both).

    >>> fsspec_options("s3://b/t", {"AWS_ENDPOINT_URL": "http://h:1", "AWS_ACCESS_KEY_ID": "k",
    ...                             "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "r"})
    {'key': 'k', 'secret': 's', 'client_kwargs': {'endpoint_url': 'http://h:1', 'region_name': 'r'}}
    >>> fsspec_options("/tmp/t", {"AWS_REGION": "r"})
    {}
    """
    if not url.startswith(("s3://", "s3a://")):
        return {}
    options: dict[str, object] = {}
    if "AWS_ACCESS_KEY_ID" in storage:
        options["key"] = storage["AWS_ACCESS_KEY_ID"]
    if "AWS_SECRET_ACCESS_KEY" in storage:
        options["secret"] = storage["AWS_SECRET_ACCESS_KEY"]
    client = {}
    if "AWS_ENDPOINT_URL" in storage:
        client["endpoint_url"] = storage["AWS_ENDPOINT_URL"]
    if "AWS_REGION" in storage:
        client["region_name"] = storage["AWS_REGION"]
    if client:
        options["client_kwargs"] = client
    return options
