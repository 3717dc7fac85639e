"""The campaign's verdict on what a run's sinks committed, in columns: at load a run commits
tens of millions of records, which the line-by-line ``prefix_problems`` would hold as Python
objects (gigabytes per run); here they are NumPy arrays, parsed by Arrow's CSV reader.

Invariant: the same verdict as ``chaos_plan.prefix_problems`` on the same records (lost,
duplicated, unexpected, bad sums, distinct records), read only from the committed files on
S3 and the PostgreSQL table, never from the job.

    >>> p = problems(*parse([b"k00000,1,1\\nk00000,2,3\\nk00000,2,3\\nk00000,4,10\\n"]), 2, 1)
    >>> p["lost"], p["duplicated"], p["bad_sums"], p["records"]
    (4, 1, 0, 3)
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from bench.chaos_plan import RunVerdict

Columns = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def parse(chunks: Iterable[bytes]) -> Columns:
    """``key,seq,sum`` lines of the chunks (each whole lines) as key numbers, sequence
    numbers and sums, and how many lines were not such (``!`` lines of the check).

    >>> keys, seqs, sums, odd = parse([b"k00003,2,3\\n!late k00001\\n", b""])
    >>> keys.tolist(), seqs.tolist(), sums.tolist(), odd
    ([3], [2], [3], 1)
    """
    keys, seqs, sums = [], [], []
    odd = 0
    for chunk in chunks:
        if b"!" in chunk:
            lines = chunk.split(b"\n")
            odd += sum(1 for line in lines if line.startswith(b"!"))
            chunk = b"\n".join(line for line in lines if line and not line.startswith(b"!"))
        if not chunk.strip():
            continue
        table = csv.read_csv(
            io.BytesIO(chunk),
            read_options=csv.ReadOptions(column_names=["k", "seq", "total"]),
            convert_options=csv.ConvertOptions(
                column_types={"k": pa.string(), "seq": pa.int64(), "total": pa.int64()}
            ),
        )
        keys.append(pc.cast(pc.utf8_slice_codeunits(table["k"], 1), pa.int64()).to_numpy())
        seqs.append(table["seq"].to_numpy())
        sums.append(table["total"].to_numpy())
    empty = np.zeros(0, dtype=np.int64)
    return (
        np.concatenate(keys) if keys else empty,
        np.concatenate(seqs) if seqs else empty,
        np.concatenate(sums) if sums else empty,
        odd,
    )


def problems(
    keys: np.ndarray, seqs: np.ndarray, sums: np.ndarray, odd: int, n_keys: int, splits: int = 2
) -> dict[str, int]:
    """``prefix_problems`` on columns: each split's records a prefix of its indices."""
    valid = (keys < n_keys) & (seqs >= 1) & (keys >= 0)
    unexpected = odd + int((~valid).sum())
    keys, seqs, sums = keys[valid], seqs[valid], sums[valid]
    bad_sums = int((sums != seqs * (seqs + 1) // 2).sum())
    index = (seqs - 1) * n_keys + keys
    counts = np.bincount(index) if index.size else np.zeros(0, dtype=np.int64)
    seen = np.flatnonzero(counts)
    lost = 0
    for split in range(splits):
        mine = seen[seen % splits == split]
        if mine.size:
            lost += int(mine.max()) // splits + 1 - int(mine.size)
    return {
        "records": int(seen.size),
        "lost": lost,
        "duplicated": int(counts.sum() - seen.size),
        "unexpected": unexpected,
        "bad_sums": bad_sums,
    }


def order_violations(keys: np.ndarray, seqs: np.ndarray, ids: np.ndarray) -> int:
    """Keys whose sequence numbers, in insertion (``id``) order, are not 1, 2, 3...

    >>> order_violations(np.array([0, 1, 0, 1]), np.array([1, 1, 2, 3]), np.arange(4))
    1
    """
    if not keys.size:
        return 0
    order = np.lexsort((ids, keys))
    k, s = keys[order], seqs[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    rank = np.arange(k.size) - np.repeat(starts, np.diff(np.r_[starts, k.size]))
    return int(np.unique(k[s != rank + 1]).size)


def _records(keys: np.ndarray, seqs: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """The records as sorted rows (a multiset to compare)."""
    rows = np.stack([keys, seqs, sums], axis=1) if keys.size else np.zeros((0, 3), np.int64)
    return rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]


def _sql_columns(data: bytes) -> tuple[np.ndarray, ...]:
    """Key numbers, sequence numbers, sums and ids of ``COPY ... TO STDOUT`` text rows.

    >>> [c.tolist() for c in _sql_columns(b"k00002\\t1\\t1\\t7\\n")]
    [[2], [1], [1], [7]]
    """
    if not data:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
    types = {"k": pa.string(), "seq": pa.int64(), "total": pa.int64(), "id": pa.int64()}
    rows = csv.read_csv(
        io.BytesIO(data),
        read_options=csv.ReadOptions(column_names=list(types)),
        parse_options=csv.ParseOptions(delimiter="\t"),
        convert_options=csv.ConvertOptions(column_types=types),
    )
    keys = pc.cast(pc.utf8_slice_codeunits(rows["k"], 1), pa.int64()).to_numpy()
    return (keys, *(rows[c].to_numpy() for c in ("seq", "total", "id")))


def verify(
    cluster: Any,
    spec: dict[str, Any],
    table: str | None,
    v: RunVerdict,
    job_id: str | None = None,
) -> None:
    """0 lost, 0 duplicated, sums right (state order) and per-key insertion order (SQL).
    A run that did not finish may have left prepared transactions of a completed checkpoint
    in PostgreSQL, which a restore would commit: they are counted in the notes."""
    assert cluster.s3 is not None
    fs = cluster.s3.filesystem()
    base = spec["out"][len("s3://") :]
    paths = [
        path
        for path in sorted(fs.find(base))
        if not path.rsplit("/", 1)[-1].startswith((".", "_"))
        and "/." not in path
        and "/_" not in path
    ]
    files = parse(fs.cat_file(path) for path in paths)
    found = problems(*files, spec["keys"])
    v.records = found["records"]
    v.lost, v.duplicated, v.unexpected = found["lost"], found["duplicated"], found["unexpected"]
    v.order_violations = found["bad_sums"]
    if table is None or cluster.pg is None:
        return
    out = io.BytesIO()
    with cluster.pg.connect() as conn:
        with conn.cursor().copy(f"COPY (SELECT k, seq, total, id FROM {table}) TO STDOUT") as c:
            for data in c:
                out.write(data)
        prepared = conn.execute(
            "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE %s", (f"%:{job_id}:%",)
        ).fetchone()[0]
    if job_id is not None and prepared:
        v.notes.append(
            f"{prepared} prepared transaction(s) of the job left in PostgreSQL, not "
            "committed (the next restore commits them; their rows are not counted)"
        )
    keys, seqs, sums, ids = _sql_columns(out.getvalue())
    sql = problems(keys, seqs, sums, 0, spec["keys"])
    if not np.array_equal(_records(keys, seqs, sums), _records(*files[:3])) or files[3]:
        v.notes.append(
            f"PostgreSQL holds {keys.size} rows, the files {files[0].size + files[3]} lines "
            f"(lost {sql['lost']}, duplicated {sql['duplicated']} in SQL)"
        )
        v.lost += sql["lost"]
        v.duplicated += sql["duplicated"]
    v.order_violations += order_violations(keys, seqs, ids)
