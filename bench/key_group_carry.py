"""The ``key-group-carry`` measurement: CPU time per record of one worker's keyed-sum path with
and without key groups carried on the hash edge (``KeyGroupedBatch``), heap or RocksDB.

One worker's share of a p=2 keyed sum, without Spark and threads: a batch of 1,024 records of
uniformly random keys goes through the hash ``RecordWriter`` into two channels, the second
batch is pickled and unpickled as a remote channel's would be, and both reach the running sum
(``set_current_key`` with the batch's key group or ``None``, ``value``, ``update``) of a backend
owning all key groups, with the synchronous part of a snapshot every 40 batches. Every key is
written once first. ``--event-time``: the batches carry timestamps (``StampedBatch``, the key
groups in its ``key_groups``). Sides alternate (off, on, on, off, ...) in one process; CPU time
(``process_time``) is reported per record, steadier than wall time on a shared machine.

Invariant: prints one JSON object as its last stdout line; the working directories are removed.

    python -m bench.key_group_carry --backend rocksdb --keys 1000000
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import shutil
import statistics
import tempfile
import time
from typing import Any

from cairn.common import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.keyed_batch import key_groups_of
from cairn.runtime.record_writer import RecordWriter
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["measure_once"]

BATCH = 1024


def measure_once(
    backend: str, keys: int, records: int, carry: bool, work: str, event_time: bool = False
) -> float:
    """CPU microseconds per record of one run (see the module docstring).

    >>> d = tempfile.mkdtemp(); measure_once("heap", 50, 2048, True, d, True) > 0
    True
    >>> shutil.rmtree(d)
    """
    owned = KeyGroupRange(0, 127)
    b: Any
    if backend == "rocksdb":
        b = RocksDBKeyedStateBackend(owned, 128, local_dir=tempfile.mkdtemp(dir=work))
    elif backend == "heap":
        b = HeapKeyedStateBackend(owned, 128)
    else:
        raise ValueError(f"unknown backend {backend!r}: heap or rocksdb")
    state = b.get_partitioned_state(ValueStateDescriptor("sum", Types.LONG()))
    inputs = [InputChannel(i) for i in range(2)]
    writer = RecordWriter(
        [LocalOutputChannel(c, capacity=1 << 30) for c in inputs],
        PartitionKind.HASH,
        key_selector=lambda r: r[0],
        max_parallelism=128,
        batch_size=BATCH,
        carry_key_groups=carry,
    )
    set_key = b.set_current_key
    value, update = state.value, state.update

    def step(ids: Any) -> None:
        batch = [(f"key-{i}", 1) for i in ids]
        writer.emit(stamp(batch, list(range(len(batch)))) if event_time else batch)
        for index, channel in enumerate(inputs):
            while channel.queue:
                batch = channel.queue.popleft()
                if index == 1:  # the remote channel's batch
                    batch = pickle.loads(pickle.dumps(batch, protocol=5))
                for r, kg in zip(batch, key_groups_of(batch), strict=False):
                    set_key(r[0], kg)
                    update((value() or 0) + r[1])

    try:
        for start in range(0, keys, BATCH):
            step(range(start, min(keys, start + BATCH)))
        rnd = random.Random(1)
        sequence = [rnd.randrange(keys) for _ in range(records)]
        cpu = time.process_time()
        for n, start in enumerate(range(0, records, BATCH)):
            step(sequence[start : start + BATCH])
            if n % 40 == 39:
                b.snapshot(n)  # the synchronous part; the upload is never run
        writer.flush_all()
        return (time.process_time() - cpu) / records * 1e6
    finally:
        b.dispose()


def measure(
    backend: str, keys: int, records: int, rounds: int, event_time: bool = False
) -> dict[str, Any]:
    """``rounds`` runs of each side, alternating; medians and their ratio."""
    work = tempfile.mkdtemp(prefix="cairn-kg-carry-")
    runs: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for i in range(rounds):
            for side in ("off", "on") if i % 2 == 0 else ("on", "off"):
                on = side == "on"
                runs[side].append(measure_once(backend, keys, records, on, work, event_time))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    return {
        "backend": backend,
        "keys": keys,
        "records": records,
        "event_time": event_time,
        "cpu_us_per_record_off": round(off, 3),
        "cpu_us_per_record_on": round(on, 3),
        "on_over_off": round(on / off, 3),
        "runs": {k: [round(x, 3) for x in v] for k, v in runs.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.key_group_carry", description=__doc__)
    parser.add_argument("--backend", choices=["heap", "rocksdb"], default="heap")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--event-time", action="store_true", help="batches with timestamps")
    args = parser.parse_args(argv)
    result = measure(args.backend, args.keys, args.records, args.rounds, args.event_time)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
