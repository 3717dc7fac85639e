"""The ``state-processor`` measurement: bootstrap and read throughput of savepoint state on
local Spark (``cairn.state_processor``), Cairn only (no peer reads or writes savepoints from
Python).

One run: a DataFrame of ``keys`` rows ``(concat('k', id), id)`` is written as the value state
``sum`` of operator ``keyed-sum`` (max parallelism 128, ``parallelism`` tasks and files), then
read back as a DataFrame and counted. Each phase is timed from the call to the end of its Spark
job (the Spark session is started, and a warm-up savepoint of 1,000 keys written and read,
before any timing). Keys/s = keys / seconds.

Invariant: prints one JSON object as its last stdout line (the fields below), like every
other measurement of ``bench``; the savepoint is written under a temporary directory and
removed.

    python -m bench.state_processor --keys 1000000 --parallelism 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from typing import Any

from cairn.common import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.deploy.spark_session import get_or_create_spark
from cairn.state_processor import SavepointReader, SavepointWriter

SUM = ValueStateDescriptor("sum", Types.LONG())


def directory_bytes(directory: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, f))
        for root, _d, files in os.walk(directory)
        for f in files
    )


def run(keys: int, parallelism: int, work: str) -> dict[str, Any]:
    spark = get_or_create_spark(None, parallelism, {})
    frame = spark.range(keys).selectExpr("concat('k', id) as key", "id as value")

    def bootstrap(n: int, target: str) -> float:
        start = time.perf_counter()
        SavepointWriter.new_savepoint(spark, max_parallelism=128).with_keyed_state(
            "keyed-sum", SUM, frame.limit(n) if n < keys else frame, parallelism=parallelism
        ).write(target)
        return time.perf_counter() - start

    def read(target: str) -> tuple[float, int]:
        start = time.perf_counter()
        reader = SavepointReader.read(spark, target)
        count = reader.read_keyed_state("keyed-sum", SUM, num_partitions=parallelism).count()
        return time.perf_counter() - start, count

    bootstrap(1000, os.path.join(work, "warm-up"))
    read(os.path.join(work, "warm-up"))
    target = os.path.join(work, "savepoint")
    bootstrap_s = bootstrap(keys, target)
    read_s, count = read(target)
    if count != keys:
        raise AssertionError(f"read {count} keys back, wrote {keys}")
    return {
        "system": "cairn",
        "workload": "state-processor",
        "keys": keys,
        "parallelism": parallelism,
        "bootstrap_s": round(bootstrap_s, 2),
        "bootstrap_keys_per_s": round(keys / bootstrap_s),
        "read_s": round(read_s, 2),
        "read_keys_per_s": round(keys / read_s),
        "savepoint_bytes": directory_bytes(target),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
            "git": git_revision(),
        },
    }


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(__file__),
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cairn-bench-state-processor-")
    try:
        result = run(args.keys, args.parallelism, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
