"""The download phase of a RocksDB restore with and without local recovery, without Spark:
the files of one subtask's checkpoint read back through ``transfer.download`` from the
checkpoint storage (``file://`` or a SeaweedFS S3 server started for the run) and from the
worker's local copies (``state.backend.local-recovery``).

Invariant: both sides read the same files of the same checkpoint (written once through a
``LocalCopyWriter``, random bytes in RocksDB-like sizes), each read checks every file's CRC
like a restore does, and the sides alternate (storage, local, local, storage, ...) so the
shared machine's load falls on both. Prints one JSON object as its last stdout line.

    python -m bench.local_recovery --storage s3 --megabytes 50 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from typing import Any

from bench.storage import STORAGES, bench_storage, checkpoint_url, fs_options
from cairn.checkpoint.handles import RocksDBKeyedStateHandle, RocksDBStateFile
from cairn.checkpoint.local_recovery import LocalRecoveryStore
from cairn.checkpoint.storage import CheckpointStorage
from cairn.ids import CheckpointId
from cairn.state.rocksdb.transfer import DEFAULT_TRANSFER_THREADS, download

__all__ = ["measure"]

CHECKPOINT = CheckpointId(7)


def measure(storage: str, megabytes: int, repeat: int, work: str) -> dict[str, Any]:
    """Seconds per download of ``megabytes`` MB (SST files of up to 16 MB plus small files)
    from the storage and from the local copies, alternating ``repeat`` times each."""
    with bench_storage(storage, work) as target:
        url = checkpoint_url(target.root, os.path.join(work, "checkpoints"))
        options = fs_options(url, dict(target.config))
        store_root = os.path.join(work, "local")
        cs = CheckpointStorage(url, "bench-local-recovery", options)
        local = LocalRecoveryStore(store_root, cs.job_dir, 0)
        writer = local.writer(cs.writer(CHECKPOINT))
        files = []
        sizes = [16 << 20] * (megabytes // 16) + [(megabytes % 16) << 20, 4096, 16, 6000]
        for i, size in enumerate(s for s in sizes if s):
            name = f"{i:06d}.sst" if size > 1 << 20 else f"MANIFEST-{i:06d}"
            data = os.urandom(size)
            path = writer.write_shared_file(name, data) if name.endswith(".sst") else (
                writer.write_state_file(name, data)
            )  # fmt: skip
            files.append(
                RocksDBStateFile(name, path, size, zlib.crc32(data), name.endswith(".sst"))
            )
        handle = RocksDBKeyedStateHandle(0, 127, tuple(files), sum(f.size for f in files))
        times: dict[str, list[float]] = {"storage": [], "local": []}
        for i in range(repeat):
            for side in ("storage", "local") if i % 2 == 0 else ("local", "storage"):
                reader: Any = cs.reader(cs.checkpoint_dir(CHECKPOINT))
                if side == "local":
                    reader = local.reader(reader, CHECKPOINT)
                target_dir = os.path.join(work, f"restore-{side}-{i}")
                began = time.perf_counter()
                download(handle, reader, target_dir, DEFAULT_TRANSFER_THREADS)
                times[side].append(time.perf_counter() - began)
                if side == "local" and reader.remote_bytes:
                    raise AssertionError(f"{reader.remote_bytes} bytes came from the storage")
                shutil.rmtree(target_dir)
    return {
        "storage": storage,
        "megabytes": megabytes,
        "files": len(files),
        "storage_s": [round(t, 3) for t in times["storage"]],
        "local_s": [round(t, 3) for t in times["local"]],
        "local_over_storage": round(
            statistics.median(times["local"]) / statistics.median(times["storage"]), 3
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_recovery")
    parser.add_argument("--storage", choices=STORAGES, default="file")
    parser.add_argument("--megabytes", type=int, default=50, help="one subtask's files")
    parser.add_argument("--repeat", type=int, default=3)
    ns = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cairn-bench-local-recovery-")
    try:
        result = measure(ns.storage, ns.megabytes, ns.repeat, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
