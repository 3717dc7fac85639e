"""The ``savepoints`` measurement: savepoint duration and size against keyed state size, on
the heap and the RocksDB backend, on local Spark (Cairn only).

For each state size (``--keys``, e.g. 100,000 and 1,000,000): the value state ``sum`` of
operator ``keyed-sum`` is bootstrapped from a DataFrame (``cairn.state_processor``, max
parallelism 128), and for each backend a job (parallelism ``--parallelism``: an idle
generator -> key_by -> running sum, which emits nothing -> print) starts from it. Once its first
checkpoint completed (the state is restored), savepoints are taken of the running job:
canonical on both backends, native too on RocksDB (its checkpoint files). Duration: from
``trigger_savepoint`` to its result (end to end: barrier, snapshot, upload, metadata);
size: the bytes of the savepoint directory. The restore (bootstrap -> running job) is timed
too: from ``execute_async`` to the first completed checkpoint, Spark start-up included.

Invariant: prints one JSON object as its last stdout line; the savepoints, checkpoints and
RocksDB directories are written under a temporary directory and removed.

    python -m bench.savepoints --keys 100000,1000000 --parallelism 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from bench.state_processor import directory_bytes, git_revision
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.state import ValueStateDescriptor
from cairn.deploy.spark_session import get_or_create_spark
from cairn.events import SavepointFormatType
from cairn.state_processor import SavepointWriter

SUM = ValueStateDescriptor("sum", Types.LONG())


class Idle:
    """A generator of nothing (``None``, filtered out): the job only holds its state."""

    def __call__(self, index: int) -> Any:
        return None

    def generate_batch(self, indices: range) -> list[Any]:
        return [None] * len(indices)


def _not_none(record: Any) -> bool:
    return record is not None


class RunningSum(KeyedProcessFunction):  # type: ignore[type-arg]
    def open(self, runtime_context: Any) -> None:
        self.sum = runtime_context.get_state(SUM)

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        self.sum.update((self.sum.value() or 0) + value[1])
        return iter(())


def _job(backend: str, savepoint: str, work: str, parallelism: int) -> Any:
    conf = Configuration()
    conf.set_string("cairn.executor", "spark")
    conf.set_string("state.backend.type", backend)
    conf.set_string("state.backend.rocksdb.localdir", os.path.join(work, "rocksdb"))
    conf.set_string("execution.savepoint.path", savepoint)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(1_000)
    env.get_checkpoint_config().set_checkpoint_storage("file://" + os.path.join(work, "chk"))
    source = DataGeneratorSource(Idle(), None, RateLimiterStrategy.per_second(10))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "idle")
        .uid("idle-source")
        .filter(_not_none)
        .key_by(lambda r: r[0])
        .process(RunningSum())
        .uid("keyed-sum")
        .print()  # the running sum emits nothing
    )
    return env


def _first_checkpoint(client: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        stats = client.get_checkpoint_statistics()
        if stats is not None and stats.counts.completed > 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("no checkpoint completed: the restore did not finish")
        time.sleep(0.05)


def run(sizes: list[int], parallelism: int, work: str) -> dict[str, Any]:
    spark = get_or_create_spark(None, parallelism, {})
    rows: list[dict[str, Any]] = []
    for keys in sizes:
        frame = spark.range(keys).selectExpr("concat('k', id) as key", "id as value")
        boot = os.path.join(work, f"bootstrap-{keys}")
        SavepointWriter.new_savepoint(spark, max_parallelism=128).with_keyed_state(
            "keyed-sum", SUM, frame, parallelism=parallelism
        ).write(boot)
        for backend in ("hashmap", "rocksdb"):
            start = time.perf_counter()
            client = _job(backend, boot, work, parallelism).execute_async(f"sp-{backend}")
            try:
                _first_checkpoint(client, 600)
                restore_s = time.perf_counter() - start
                formats = [SavepointFormatType.CANONICAL]
                if backend == "rocksdb":
                    formats.append(SavepointFormatType.NATIVE)
                for fmt in formats:
                    target = os.path.join(work, f"sp-{keys}-{backend}-{fmt.value}")
                    t0 = time.perf_counter()
                    client.trigger_savepoint(target, fmt).result(timeout=600)
                    rows.append(
                        {
                            "keys": keys,
                            "backend": backend,
                            "format": fmt.value,
                            "savepoint_s": round(time.perf_counter() - t0, 2),
                            "savepoint_bytes": directory_bytes(target),
                            "restore_to_first_checkpoint_s": round(restore_s, 2),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
                    shutil.rmtree(target, ignore_errors=True)
            finally:
                client.cancel()
                client.get_job_execution_result(timeout=120)
        shutil.rmtree(boot, ignore_errors=True)
    return {
        "system": "cairn",
        "workload": "savepoints",
        "parallelism": parallelism,
        "rows": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
            "git": git_revision(),
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="100000,1000000", help="comma-separated sizes")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cairn-bench-savepoints-")
    try:
        result = run([int(k) for k in args.keys.split(",")], args.parallelism, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
