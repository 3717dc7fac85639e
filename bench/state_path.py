"""The ``state-path`` measurement: CPU time per record of the keyed-sum state accesses alone
(``set_current_key``, ``value``, ``update``), heap vs RocksDB, without the engine.

One run: a backend owning all 128 key groups; every one of ``keys`` keys written once (the
fill), then ``records`` updates of uniformly random keys, with the synchronous part of a
snapshot every ``snapshot_every`` records (40,000: one second of one subtask at 40k records/s),
as a job with 1 s checkpoints has. Reported: CPU time per record of the whole process
(RocksDB's flush and compaction threads included) and of the calling thread, and the
synchronous snapshot parts (RocksDB: write-cache flush + memtable flush + hard links). CPU time
is steadier than wall throughput on a shared machine; compare backends in one run.

Invariant: prints one JSON object as its last stdout line, like every other measurement of
``bench``; the RocksDB working directory is removed.

    python -m bench.state_path --keys 1000000 --records 400000 --backend rocksdb
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from typing import Any

from cairn.common import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["measure"]


def measure(backend: str, keys: int, records: int, snapshot_every: int = 40_000) -> dict[str, Any]:
    """Fill ``keys`` keys, then time ``records`` random updates (see the module docstring).

    >>> measure("heap", 100, 1000)["records"]
    1000
    """
    if keys < 1 or records < 1 or snapshot_every < 1:
        raise ValueError("keys, records and snapshot_every must be positive")
    work = tempfile.mkdtemp(prefix="cairn-state-path-")
    kg = KeyGroupRange(0, 127)
    b: Any
    if backend == "rocksdb":
        b = RocksDBKeyedStateBackend(kg, 128, local_dir=work)
    elif backend == "heap":
        b = HeapKeyedStateBackend(kg, 128)
    else:
        raise ValueError(f"unknown backend {backend!r}: heap or rocksdb")
    try:
        state = b.get_partitioned_state(ValueStateDescriptor("sum", Types.LONG()))
        names = [f"k{i:07d}" for i in range(keys)]
        syncs: list[float] = []
        checkpoint = 0

        def snapshot() -> None:
            nonlocal checkpoint
            checkpoint += 1
            start = time.perf_counter()
            b.snapshot(checkpoint)  # the synchronous part; the upload is never run
            syncs.append((time.perf_counter() - start) * 1000)

        for i, key in enumerate(names):
            b.set_current_key(key)
            state.update((state.value() or 0) + 1)
            if i % snapshot_every == snapshot_every - 1:
                snapshot()
        rnd = random.Random(1)
        sequence = [names[rnd.randrange(keys)] for _ in range(records)]
        syncs.clear()
        cpu, thread = time.process_time(), time.thread_time()
        for i, key in enumerate(sequence):
            b.set_current_key(key)
            state.update((state.value() or 0) + 1)
            if i % snapshot_every == snapshot_every - 1:
                snapshot()
        cpu, thread = time.process_time() - cpu, time.thread_time() - thread
    finally:
        b.dispose()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "backend": backend,
        "keys": keys,
        "records": records,
        "cpu_us_per_record": round(cpu / records * 1e6, 2),
        "thread_us_per_record": round(thread / records * 1e6, 2),
        "records_per_cpu_s": round(records / cpu) if cpu else None,
        "sync_p50_ms": round(statistics.median(syncs), 1) if syncs else None,
        "sync_max_ms": round(max(syncs), 1) if syncs else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_path", description=__doc__)
    parser.add_argument("--backend", choices=["heap", "rocksdb"], default="rocksdb")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--snapshot-every", type=int, default=40_000)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.backend, args.keys, args.records, args.snapshot_every)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
