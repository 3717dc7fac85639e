"""The ``marker-cost`` measurement: CPU time per record of a source task and two consumer
tasks (real ``StreamTask``s, one thread, no Spark) with latency markers off and on.

A source task polls batches of 1,024 ``(key, 1)`` records over ``--keys`` keys and sends
them through a hash ``RecordWriter`` into two local channels, each read by a task whose
operator keeps a running sum per key in a dict; the loop runs them as a worker does
(``run_once``, ``fire_timers``, the idle flush). Sides alternate in one process (off, then
each ``--interval-ms`` in turn, repeated in reverse order); CPU time (``process_time``) is
reported per record, steadier than wall time on a shared machine, and for each interval the
CPU time per marker (on minus off, over the markers sent). Without ``--interval-ms`` only
the off side runs, which also works on a checkout that has no latency markers: run it with
each checkout's ``src`` on ``PYTHONPATH`` to compare the record path of two checkouts.

Invariant: prints one JSON object as its last stdout line.

    python -m bench.marker_cost --records 2000000 --interval-ms 1,1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cairn.checkpoint.messages import TaskKey
from cairn.events import AlignmentMode
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import PartitionKind
from cairn.ids import SubtaskIndex, VertexId
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.faults import FaultInjector
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.operators.sources import SourceOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.task import StreamTask

__all__ = ["measure_once"]

BATCH = 1024


class _Services:
    attempt = 0
    job_id = "bench"

    def __init__(self) -> None:
        self.faults = FaultInjector((), 0, hard_kill=False)

    def send_to_master(self, message: Any) -> None:
        pass

    def submit_async(self, fn: Callable[[], None]) -> None:
        fn()

    def state_writer(self, checkpoint_id: int) -> Any:
        raise NotImplementedError("no checkpoints here")

    def wake(self) -> None:
        pass

    def control_pending(self) -> bool:
        return False


class _Batches(SourceOperator):
    def __init__(self, node: OperatorNode, records: list[tuple[str, int]]) -> None:
        super().__init__(node)
        self._records = records
        self._at = 0

    def poll(self, max_records: int) -> list[Any] | None:
        if self._at >= len(self._records):
            return None
        batch = self._records[self._at : self._at + max_records]
        self._at += len(batch)
        return batch


class _Sum(StreamOperator):
    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        self.sums: dict[str, int] = {}

    def process_batch(self, records: list[Any]) -> None:
        sums = self.sums
        get = sums.get
        for key, value in records:
            sums[key] = get(key, 0) + value


def _node(uid: str, kind: str) -> OperatorNode:
    return OperatorNode(uid, uid, 1, kind, None, None, 2, 128, False)  # type: ignore[arg-type]


def measure_once(keys: int, records: int, interval_ms: int | None) -> tuple[float, int]:
    """CPU microseconds per record of one run, and the markers the source sent.

    >>> us, markers = measure_once(100, 4096, None)
    >>> us > 0 and markers == 0
    True
    """
    data = [(f"k{i % keys}", 1) for i in range(records)]
    latency: dict[str, Any] = {}
    if interval_ms is not None:
        from cairn.runtime.latency import LatencyConfig  # absent in older checkouts

        latency = {"latency": LatencyConfig(interval_ms)}
    services = _Services()
    inputs = [InputChannel(i) for i in range(2)]
    writer = RecordWriter(
        [LocalOutputChannel(ch) for ch in inputs],
        PartitionKind.HASH,
        key_selector=lambda r: r[0],
        max_parallelism=128,
    )
    source = _Batches(_node("source", "source"), data)
    source.output = writer.emit
    aligned = AlignmentMode.ALIGNED
    vertex = JobVertex(0, "source", 1, 128, (source.node,), True, True)  # type: ignore[arg-type]
    key = TaskKey(VertexId(0), SubtaskIndex(0))
    tasks = [StreamTask(key, vertex, [source], None, [writer], services, aligned, False, **latency)]
    sums = []
    for i, ch in enumerate(inputs):
        op = _Sum(_node("sum", "process"))
        sums.append(op)
        v = JobVertex(1, "sum", 2, 128, (op.node,), False, True)  # type: ignore[arg-type]
        k = TaskKey(VertexId(1), SubtaskIndex(i))
        tasks.append(
            StreamTask(k, v, [op], InputGate([ch]), [], services, aligned, False, **latency)
        )
    started = time.process_time()
    while not all(t.finished for t in tasks):
        did = False
        for t in tasks:
            did = t.run_once() or did
        now_ms = int(time.time() * 1000)
        for t in tasks:
            did = t.fire_timers(now_ms) or did
        if not did:
            for t in tasks:
                t.flush_ready()
    cpu = time.process_time() - started
    assert sum(sum(op.sums.values()) for op in sums) == records
    markers = 0
    for t in tasks[1:]:
        for report in t.metrics().latency if interval_ms is not None else ():
            markers += report.stats.count
    return cpu * 1e6 / records, markers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.marker_cost")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--interval-ms", default="", help="comma-separated; empty: off only")
    ns = parser.parse_args(argv)
    intervals: list[int | None] = [None] + [int(i) for i in ns.interval_ms.split(",") if i]
    per_record: dict[str, list[float]] = {str(i): [] for i in intervals}
    markers: dict[str, list[int]] = {str(i): [] for i in intervals}
    measure_once(ns.keys, min(ns.records, 100_000), None)  # warm-up
    for r in range(ns.repeat):
        for interval in intervals if r % 2 == 0 else list(reversed(intervals)):
            us, sent = measure_once(ns.keys, ns.records, interval)
            per_record[str(interval)].append(us)
            markers[str(interval)].append(sent)
            print(f"interval {interval}: {us:.3f} us/record, {sent} markers", file=sys.stderr)
    off = statistics.median(per_record["None"])
    result: dict[str, Any] = {"records": ns.records, "keys": ns.keys, "off_us_per_record": off}
    for interval in intervals[1:]:
        on = statistics.median(per_record[str(interval)])
        sent = statistics.median(markers[str(interval)])
        result[f"on_{interval}ms_us_per_record"] = round(on, 4)
        result[f"on_{interval}ms_ratio"] = round(on / off, 4)
        if sent:
            result[f"on_{interval}ms_us_per_marker"] = round((on - off) * ns.records / sent, 2)
    result["off_runs"] = [round(x, 4) for x in per_record["None"]]
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
