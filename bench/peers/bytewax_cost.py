"""Bytewax 0.21.1 peer of the cost-at-a-rate benchmark (``python -m bench.cost_curve``), run
until killed.

Invariant: the flow is a partitioned source (partition ``j`` of ``p`` emits records
``i = j, j + p, ...`` as ``(key, (1, created_ns))``, paced to ``rate / p`` records/s by
``cost_common.Pacer`` and stamped with the schedule; resumable at its next index) ->
``stateful_map`` counting per key -> a map to the line -> Bytewax's ``DirSink`` (2 files, a
partition each, truncated to the snapshot on resume), wrapped so that each line gets its
arrival stamped as the sink writes it; 2 worker threads, recovery on with a 1 s epoch (the
snapshot interval). Every line is ``key,count,created_ns,arrival_ns``.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import bytewax_launch
import common
import cost_common


def build_flow(args: argparse.Namespace) -> Any:
    import bytewax.operators as op
    from bytewax.connectors.files import DirSink
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import StatefulSinkPartition

    keys = common.key_table(args.keys)
    parts = args.parallelism
    rate_per_part = args.rate / parts
    golden, mask, n_keys = common.GOLDEN64, (1 << 64) - 1, len(keys)

    class Paced(StatefulSourcePartition):
        def __init__(self, first: int, resume: int | None) -> None:
            self.first = first
            self.pacer = cost_common.Pacer(rate_per_part, time.time_ns())
            self.pacer.next = 0 if resume is None else resume

        def next_batch(self) -> list[Any]:
            pacer = self.pacer
            n0 = pacer.next
            granted = pacer.grant(time.time_ns(), 1 << 20)
            if not granted:
                return []
            indices = range(self.first + n0 * parts, self.first + (n0 + granted) * parts, parts)
            step, due0 = pacer.step_ns, pacer.start_ns
            return [
                (keys[(((i * golden) & mask) >> 32) % n_keys], (1, due0 + int((n + 1) * step)))
                for n, i in enumerate(indices, n0)
            ]

        def next_awake(self) -> datetime:
            return datetime.fromtimestamp(self.pacer.ready_ns() / 1e9, tz=timezone.utc)

        def snapshot(self) -> int:
            return self.pacer.next

    class Source(FixedPartitionedSource):
        def list_parts(self) -> list[str]:
            return [str(j) for j in range(parts)]

        def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Paced:
            return Paced(int(for_part), resume_state)

    class Stamped(StatefulSinkPartition):
        """Bytewax's file partition, each line stamped with its arrival as it is written."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def write_batch(self, values: list[str]) -> None:
            now = time.time_ns
            self.inner.write_batch([f"{v},{now()}" for v in values])

        def snapshot(self) -> Any:
            return self.inner.snapshot()

        def close(self) -> None:
            self.inner.close()

    class StampedDirSink(DirSink):
        def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Stamped:
            return Stamped(super().build_part(step_id, for_part, resume_state))

    def count(total: int | None, value: tuple[int, int]) -> tuple[int, tuple[int, int]]:
        total = (total or 0) + value[0]
        return total, (total, value[1])

    flow = Dataflow("cost_at_a_rate")
    records = op.input("numbers", flow, Source())
    counts = op.stateful_map("count", records, count)
    lines = op.map("line", counts, lambda kv: (kv[0], f"{kv[0]},{kv[1][0]},{kv[1][1]}"))
    op.output("files", lines, StampedDirSink(Path(args.out), parts))
    return flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    cost_common.add_cost_args(parser)
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    args.processes = 1  # worker threads of this process (bytewax_launch's default mode)
    bytewax_launch.run_dataflow(args, build_flow(args))
    os._exit(0)


if __name__ == "__main__":
    main()
