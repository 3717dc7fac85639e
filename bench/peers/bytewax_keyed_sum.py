"""Bytewax 0.21.1 peer: keyed running sum with ``op.stateful_map``, 2 workers, recovery on.

The workers run as threads of one process (``bytewax``), or with ``--processes 2`` as two
processes of one worker each (``bytewax-2p``: Bytewax's ``-p`` mode, no shared GIL).

Invariant: the flow is a partitioned generator source (partition ``j`` of ``p`` emits Cairn's
``(key, value)`` records ``i = j, j + p, ...``, resumable at its next index; a keyed stream
as it is) -> ``stateful_map`` running sum -> a discarding sink that counts; with
``--checkpoint-interval-ms N > 0`` recovery snapshots are taken every ``N`` ms (the epoch
interval). Last stdout line: one JSON result.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import bytewax_launch
import common
import recovery

SYSTEM = "bytewax"
# Records per next_batch call when not rate limited (Cairn's sources poll batches too).
BATCH = int(os.environ.get("PEER_BYTEWAX_BATCH", "1000"))


def build_flow(args: argparse.Namespace, probes_dir: str, run_tag: str) -> Any:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    keys = common.key_table(args.keys)
    parts, end = args.parallelism, args.records
    rate_per_part = args.rate / parts if args.rate > 0 else 0.0
    latency = args.workload == "latency"
    track_sums = args.workload == "recovery"

    class Generated(StatefulSourcePartition):
        def __init__(self, start: int, resume: int | None) -> None:
            self.next = start if resume is None else resume
            self.due = time.time()

        def next_batch(self) -> list[Any]:
            if self.next >= end:
                raise StopIteration
            if rate_per_part:
                # Every record whose due time has come; stamped with its creation time.
                now = time.time()
                n = max(0, min(int((now - self.due) * rate_per_part), BATCH))
                if n == 0:
                    return []
                self.due += n / rate_per_part
                stop = min(end, self.next + n * parts)
                indices = range(self.next, stop, parts)
                batch = common.keyed_records(indices, keys)
                if latency:  # stamped with the creation time only where it is measured
                    batch = [(k, (v, now)) for k, v in batch]
            else:
                stop = min(end, self.next + BATCH * parts)
                batch = common.keyed_records(range(self.next, stop, parts), keys)
            self.next = stop
            return batch

        def next_awake(self) -> datetime | None:
            if not rate_per_part:
                return None
            return datetime.fromtimestamp(self.due + 1.0 / rate_per_part, tz=timezone.utc)

        def snapshot(self) -> int:
            return self.next

    class Numbers(FixedPartitionedSource):
        def list_parts(self) -> list[str]:
            return [str(j) for j in range(parts)]

        def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Generated:
            return Generated(int(for_part), resume_state)

    class Counting(StatelessSinkPartition):
        def __init__(self) -> None:
            self.probe = common.Probe(probes_dir, latency=latency, run_tag=run_tag)

        def write_batch(self, items: list[Any]) -> None:
            if latency:
                record = self.probe.record
                for _key, (_sum, created) in items:
                    record(created)
            elif track_sums:
                self.probe.record_batch(len(items))
                self.probe.final_sums.update(items)
            else:
                self.probe.record_batch(len(items))

        def close(self) -> None:
            self.probe.close()

    class Discard(DynamicSink):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Counting:
            return Counting()

    def add(total: int | None, value: int) -> tuple[int, int]:
        total = (total or 0) + value
        return total, total

    def add_timed(total: int | None, value: tuple[int, float]) -> tuple[int, Any]:
        total = (total or 0) + value[0]
        return total, (total, value[1])

    flow = Dataflow("keyed_sum")
    records = op.input("numbers", flow, Numbers())
    # The records are (key, value) 2-tuples: already a keyed stream for Bytewax's routing.
    sums = op.stateful_map("running_sum", records, add_timed if latency else add)
    op.output("discard", sums, Discard())
    return flow


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work_dir)
    probes_dir = str(work / "probes")
    interval_ms = args.checkpoint_interval_ms or 1000
    if args.processes > 1:
        bytewax_launch.run_cluster(args, __file__)
    else:
        bytewax_launch.run_dataflow(args, build_flow(args, probes_dir, args.run_tag))
    end = time.time()
    result = common.result_template(args, SYSTEM)
    result["versions"]["bytewax"] = importlib.metadata.version("bytewax")
    probes = common.collect_probes(probes_dir, args.run_tag, args.latency_warmup_s)
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    if probes["first"] is not None:
        result["startup_s"] = round(probes["first"] - common.SCRIPT_START, 3)
    result["steady_records_per_s"] = probes["steady_records_per_s"]
    result["processed"] = probes["count"]
    result["final_sum_total"] = probes["final_sum_total"]
    common.latency_fields(result, probes["latencies_ms"])
    if args.checkpoint_interval_ms > 0:
        result["checkpoint_bytes"] = sum(
            f.stat().st_size for f in (work / "recovery").glob("*") if f.is_file()
        )
        result["note"] = (
            f"recovery on: snapshots at every epoch ({interval_ms} ms) into SQLite partitions; "
            "Bytewax exposes no per-snapshot duration, so checkpoint_p50/p99 are null; "
            "checkpoint_bytes = size of the recovery partitions at the end"
        )
    else:
        result["note"] = f"recovery off (epoch interval {interval_ms} ms)"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--role", default="main", choices=("main", "job", "process"))
    parser.add_argument("--run-tag", default="run")
    parser.add_argument("--restore", action="store_true")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="processes sharing the --parallelism workers (default 1: threads)",
    )
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--addresses", default="")
    args = parser.parse_args()
    if args.role == "process":  # one member of a --processes cluster
        bytewax_launch.run_dataflow(
            args,
            build_flow(args, str(Path(args.work_dir) / "probes"), args.run_tag),
            args.process_id,
            args.addresses.split(","),
        )
        sys.stdout.flush()
        os._exit(0)
    if args.processes < 1 or args.parallelism % args.processes:
        raise SystemExit("--processes must divide --parallelism")
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-bytewax-")
    if args.workload == "recovery" and args.role == "main" and args.processes > 1:
        result = common.result_template(args, SYSTEM)
        result["unsupported"] = (
            "the recovery harness kills and restarts one process; "
            "measured with worker threads (system bytewax)"
        )
        common.emit(result)
        sys.stdout.flush()
        os._exit(0)
    common.keyed_sum_main(
        args,
        run_job,
        lambda a: recovery.run_recovery(a, SYSTEM, __file__),
        (
            "the worker process (both worker threads) is SIGKILLed and restarted by the harness "
            "with the same recovery partitions; Bytewax resumes from the last complete epoch"
        ),
    )


if __name__ == "__main__":
    main()
