"""The Iceberg sink's commit decisions, pure: which checkpoint a table already holds for a
job, whether to commit one, what a snapshot's summary records, a partition field's text, and
which data files are an aborted attempt's.

Invariant: a snapshot the sink commits carries ``flink.job-id`` (the Cairn job id) and
``flink.max-committed-checkpoint-id`` (the checkpoint it commits) in its summary — Flink's
Iceberg sink's property names, with the same meaning — and a checkpoint of a job is
committed only if no ancestor of the table's current snapshot records it or a later one of
that job; so replaying a checkpoint's committables after a restore commits nothing twice.

>>> summaries = [{"flink.job-id": "b", "flink.max-committed-checkpoint-id": "9"},
...              {"flink.job-id": "a", "flink.max-committed-checkpoint-id": "4"},
...              {"flink.job-id": "a", "flink.max-committed-checkpoint-id": "3"}]
>>> last_committed_checkpoint(summaries, "a")
4
>>> should_commit(last_committed_checkpoint(summaries, "a"), 4), should_commit(4, 5)
(False, True)
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping

__all__ = [
    "JOB_ID_PROPERTY",
    "MAX_CHECKPOINT_PROPERTY",
    "attempt_of",
    "last_committed_checkpoint",
    "orphan_data_files",
    "partition_field",
    "should_commit",
    "snapshot_properties",
    "write_uuid",
]

JOB_ID_PROPERTY = "flink.job-id"
MAX_CHECKPOINT_PROPERTY = "flink.max-committed-checkpoint-id"


def last_committed_checkpoint(
    summaries_newest_first: Iterable[Mapping[str, str]], job_id: str
) -> int | None:
    """The checkpoint id of the newest snapshot of ``job_id`` among the summaries of the
    current snapshot and its ancestors (newest first), or ``None`` if the job committed none.

    >>> last_committed_checkpoint([{"other": "x"}], "a") is None
    True
    """
    for summary in summaries_newest_first:
        if summary.get(JOB_ID_PROPERTY) == job_id:
            value = summary.get(MAX_CHECKPOINT_PROPERTY)
            if value is not None:
                return int(value)
    return None


def should_commit(last_committed: int | None, checkpoint_id: int) -> bool:
    """Whether the committables of ``checkpoint_id`` still have to be committed, given the
    job's last committed checkpoint (checkpoints commit in order: a later one committed means
    this one was committed with it or before).

    >>> should_commit(None, 1)
    True
    """
    return last_committed is None or checkpoint_id > last_committed


def snapshot_properties(job_id: str, checkpoint_id: int) -> dict[str, str]:
    """The summary properties of the snapshot that commits ``checkpoint_id`` of ``job_id``.

    >>> snapshot_properties("9f2c", 7)
    {'flink.job-id': '9f2c', 'flink.max-committed-checkpoint-id': '7'}
    """
    return {JOB_ID_PROPERTY: job_id, MAX_CHECKPOINT_PROPERTY: str(checkpoint_id)}


_FIELD = re.compile(r"^\s*(?:(\w+(?:\[\d+\])?)\s*\(\s*(\w+)\s*\)|(\w+))\s*$")


def partition_field(text: str) -> tuple[str, str]:
    """``(transform, column)`` of a partition field written as Iceberg prints it:
    ``column`` (identity), ``day(ts)``, ``bucket[16](id)``, ``truncate[4](name)``...

    >>> partition_field("region"), partition_field("day(ts)"), partition_field("bucket[8](id)")
    (('identity', 'region'), ('day', 'ts'), ('bucket[8]', 'id'))
    >>> partition_field("day(")
    Traceback (most recent call last):
    ...
    ValueError: Iceberg partition field 'day(' is not 'column' or 'transform(column)' ...
    """
    match = _FIELD.match(text)
    if match is None:
        raise ValueError(
            f"Iceberg partition field {text!r} is not 'column' or 'transform(column)' "
            "(e.g. 'day(ts)', 'bucket[16](id)')"
        )
    transform, column, plain = match.groups()
    return ("identity", plain) if plain else (transform, column)


def _job_tag(job_id: str) -> str:
    return hashlib.sha1(job_id.encode()).hexdigest()[:8]


def write_uuid(job_id: str, attempt: int, random_hex: str) -> uuid.UUID:
    """A writer's file-name uuid (pyiceberg names data files ``00000-<n>-<uuid>.parquet``):
    a tag of the job id, the attempt number, 64 random bits — unique, and recognisable as
    one attempt's of the job for the cleanup after a restore.

    >>> u = write_uuid("job-1", 3, "0123456789abcdef")
    >>> attempt_of(f"s3://wh/t/data/00000-0-{u}.parquet", "job-1"), attempt_of(str(u), "job-2")
    (3, None)
    """
    return uuid.UUID(hex=f"{_job_tag(job_id)}{attempt:08x}{random_hex[:16]:0>16}")


_DATA_FILE = re.compile(r"-([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-[0-9a-f]{4}-[0-9a-f]{12}")


def attempt_of(path: str, job_id: str) -> int | None:
    """The attempt of ``job_id`` whose writer named the data file ``path``, else ``None``."""
    match = _DATA_FILE.search(path.rsplit("/", 1)[-1])
    if match is None or match.group(1) != _job_tag(job_id):
        return None
    return int(match.group(2) + match.group(3), 16)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/*")


def _location_key(path: str) -> str:
    """``path`` without its scheme and leading slashes: ``file:/a``, ``file:///a``, ``/a``
    and ``a`` are one file; ``s3://b/k`` is ``b/k``, as a file system lists it."""
    return _SCHEME.sub("", path, count=1).lstrip("/")


def orphan_data_files(
    paths: Iterable[str], job_id: str, current_attempt: int, referenced: Iterable[str]
) -> list[str]:
    """Data files of earlier attempts of ``job_id`` that no snapshot of the table references:
    written by a writer whose checkpoint never completed (an aborted attempt). Files of the
    current attempt, of other jobs, and any a snapshot names are not.

    >>> old = str(write_uuid("j", 0, "1" * 16)); new = str(write_uuid("j", 1, "2" * 16))
    >>> files = [f"/wh/data/00000-0-{old}.parquet", f"/wh/data/00000-1-{old}.parquet",
    ...          f"/wh/data/00000-0-{new}.parquet", "/wh/data/00000-0-other.parquet"]
    >>> orphan_data_files(files, "j", 1, [f"file:///wh/data/00000-0-{old}.parquet"])
    ['/wh/data/00000-1-5c2dd944-0000-0000-1111-111111111111.parquet']

    A REST catalog's tables (Iceberg's Java catalogs) name local files ``file:/wh/...``:

    >>> orphan_data_files(files[:2], "j", 1, [f"file:/wh/data/00000-0-{old}.parquet"])
    ['/wh/data/00000-1-5c2dd944-0000-0000-1111-111111111111.parquet']
    """
    seen = {_location_key(p) for p in referenced}
    return sorted(
        p
        for p in paths
        if p.endswith(".parquet")
        and _location_key(p) not in seen
        and (attempt := attempt_of(p, job_id)) is not None
        and attempt != current_attempt
    )
