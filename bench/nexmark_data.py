"""The Nexmark benchmark's input: Cairn's generated events as CSV files every system reads.

Invariant: ``ensure_data(n, seed, files)`` returns a folder holding events ``0 .. n - 1`` of
``NexmarkGenerator(NexmarkConfig(events_num=n, first_event_rate=RATE, seed=seed))`` in
``files`` CSV files (``part-000-<salt>.csv``, ...), each a contiguous, time-ordered slice,
one line per event in ``nexmark_common.COLUMNS`` order (the columns of the event's kind
filled, the others empty = NULL; timestamps ``yyyy-MM-dd HH:mm:ss.SSS``). The slices are as
many as the jobs' source subtasks (2), so that each subtask reads its events in time order:
one reading a later slice before an earlier one would find the earlier slice's events behind
its 4 s watermark. Flink's file source hands each reader one file as it asks; Cairn's gives a
file to subtask ``crc32(url) % parallelism``, so the names carry a salt that sends file
``k`` to subtask ``k`` (checked after writing; moving the folder can undo it). Files are
written once per ``(n, seed, files)`` under ``bench/out/nexmark-data/``; ``_manifest.json``
(a leading underscore hides it from every reader), written last, marks a complete folder and
notes the counts and the last event's time (``last_time``: the Spark peer's flush rows come
an hour later). Generator strings that are empty (rare: an item name) read as NULL in every
system, as the CSV's empty field.

    python -m bench.nexmark_data --events 1000000     # prints the folder
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import nexmark_common as nc  # noqa: E402

__all__ = ["DATA_ROOT", "RATE", "ensure_data", "flat_row"]

DATA_ROOT = Path(__file__).resolve().parent / "out" / "nexmark-data"
#: Events per second of event time (nexmark-flink's ``first-event.rate`` default, 10 000).
RATE = 10_000
BATCH = 50_000


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.strftime(nc.FLINK_TIMESTAMP_FORMAT)[:23]
    return str(value)


def flat_row(event: Any) -> list[str]:
    """One generated event ``(event_type, person, auction, bid)`` as a CSV line's fields.

    >>> row = flat_row((2, None, None, (1000, 1001, 5, "Apple", "u", None, "x")))
    >>> row[0], row[1], row[-7:-4], len(row)
    ('2', '', ['1000', '1001', '5'], 26)
    """
    out = [str(event[0])]
    for position, (_, _, fields) in enumerate(nc.KINDS, start=1):
        values = event[position]
        out += [""] * len(fields) if values is None else [_text(v) for v in values]
    return out


def folder_of(n: int, seed: int, files: int, root: Path = DATA_ROOT) -> Path:
    return root / f"n{n}-seed{seed}-files{files}"


def part_name(folder: Path, k: int, files: int) -> str:
    """``part-<k>-<salt>.csv``, the first salt whose URL Cairn's file source gives to its
    subtask ``k`` at parallelism ``files`` (``file_source.owner_of``, a hash of the URL)."""
    from cairn.datastream.connectors.file_source import owner_of

    for salt in range(10_000):
        name = f"part-{k:03d}-{salt}.csv"
        if owner_of((folder / name).resolve().as_uri(), files) == k % files:
            return name
    raise RuntimeError(f"no name of file {k} hashes to subtask {k % files}")


def files_per_subtask(folder: Path, parallelism: int) -> list[int]:
    """How many of the files in ``folder`` each of Cairn's ``parallelism`` source subtasks
    reads."""
    from cairn.datastream.connectors.file_source import list_files, owner_of

    counts = [0] * parallelism
    for url in list_files([str(folder.resolve())], missing_ok=False):
        counts[owner_of(url, parallelism)] += 1
    return counts


def ensure_data(n: int, seed: int = 0, files: int = 2, root: Path = DATA_ROOT) -> Path:
    """The folder of the events (written now unless a complete one exists)."""
    folder = folder_of(n, seed, files, root)
    if (folder / "_manifest.json").exists() and files_per_subtask(folder, files) == [1] * files:
        return folder
    from cairn.datastream.connectors.nexmark import NexmarkGenerator
    from cairn.datastream.connectors.nexmark_model import NexmarkConfig

    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*"):
        stale.unlink()
    started = time.time()
    generator = NexmarkGenerator(NexmarkConfig(events_num=n, first_event_rate=RATE, seed=seed))
    bounds = [n * k // files for k in range(files + 1)]
    last_time: datetime.datetime | None = None
    kinds = [0, 0, 0]
    for k in range(files):
        tmp = folder / f".part-{k:03d}.tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            for lo in range(bounds[k], bounds[k + 1], BATCH):
                batch = generator.generate_batch(range(lo, min(lo + BATCH, bounds[k + 1])))
                for event in batch:
                    kinds[event[0]] += 1
                    last_time = event[1 + event[0]][6 if event[0] == 0 else 5]
                writer.writerows(flat_row(e) for e in batch)
        os.replace(tmp, folder / part_name(folder, k, files))
    owners = files_per_subtask(folder, files)
    if owners != [1] * files:
        raise RuntimeError(f"{folder}: Cairn's source subtasks would read {owners} files")
    manifest = {
        "events": n,
        "seed": seed,
        "files": files,
        "first_event_rate": RATE,
        "persons": kinds[0],
        "auctions": kinds[1],
        "bids": kinds[2],
        "bytes": sum(p.stat().st_size for p in folder.glob("part-*.csv")),
        "last_time": _text(last_time),
        "generated_s": round(time.time() - started, 1),
    }
    (folder / "_manifest.json").write_text(json.dumps(manifest, indent=1))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark_data", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--files", type=int, default=2)
    args = parser.parse_args(argv)
    print(ensure_data(args.events, args.seed, args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
