"""Bytewax 0.21.1 peer of the ``window`` workload: ``fold_window`` with an ``EventClock``.

Invariant: the flow is a partitioned generator source (partition ``j`` of
``--source-partitions p``, default 1, emits ``window_common``'s events ``i = j, j + p, ...``
in order as ``(key, (ts_ms, value))``, resumable at its next index) -> ``fold_window``
(``EventClock`` with a 500 ms ``wait_for_system_duration``, ``TumblingWindower`` of 1 s
aligned to window 0, a ``(count, sum)`` accumulator, ``ordered=False``: the fold is
commutative) -> a sink tallying the results (window id = window index) and one counting late
events; recovery snapshots every ``--checkpoint-interval-ms`` (the epoch interval).
``--processes 2``: two processes of one worker each (``bytewax-2p``). Last stdout line: one
JSON result.

Bytewax's event clock is per key and by default also advances with system time after a
key's latest event (latest timestamp - wait + system time since), which makes events late as
soon as the job processes slower than event time passes (here: always, 1M events per second
of event time). The clock gets a ``now_getter`` that stands still (Bytewax's way to replay
history; its docs), so its watermark is the bounded-out-of-orderness one of the other systems,
per key: a key's window closes at the key's next event past its end + 500 ms, or at the end
of input. That watermark is not the minimum over the source partitions (as Flink's and
Cairn's are): with 2 partitions read side by side by 2 workers, a key's events from the
partition that is behind arrive below the watermark that the other pushed up, and are dropped
as late (a fifth to nearly half of them in trial runs). So the events come from one partition, in
order; the windows (the per-event work) still run on both workers, by key.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import bytewax_launch
import common
import window_common as wc

SYSTEM = "bytewax"
BATCH = 1000
T0 = datetime.fromtimestamp(wc.T0_MS / 1000, tz=timezone.utc)


def build_flow(args: argparse.Namespace, probes_dir: str) -> Any:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    keys = common.key_table(args.keys)
    parts, end, eps = args.source_partitions, args.records, args.events_per_second

    class Generated(StatefulSourcePartition):
        def __init__(self, start: int, resume: int | None) -> None:
            self.next = start if resume is None else resume

        def next_batch(self) -> list[Any]:
            if self.next >= end:
                raise StopIteration
            stop = min(end, self.next + BATCH * parts)
            indices = range(self.next, stop, parts)
            batch = [(k, (ts, v)) for k, ts, v in wc.events(indices, keys, eps)]
            self.next = stop
            return batch

        def snapshot(self) -> int:
            return self.next

    class Events(FixedPartitionedSource):
        def list_parts(self) -> list[str]:
            return [str(j) for j in range(parts)]

        def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Generated:
            return Generated(int(for_part), resume_state)

    class Tally(StatelessSinkPartition):
        def __init__(self, late: bool) -> None:
            self.late = late
            self.tally = wc.WindowTally()
            self.late_events = 0
            self.name = f"tally-{os.getpid()}-{id(self):x}-{time.time_ns()}.json"

        def write_batch(self, items: list[Any]) -> None:
            if self.late:
                self.late_events += len(items)
                return
            now = time.time()
            add = self.tally.add
            for key, (window_id, (count, total)) in items:
                add(key, window_id, count, total, now)

        def close(self) -> None:
            os.makedirs(probes_dir, exist_ok=True)
            name = ("late-" if self.late else "") + self.name
            data = {"late": self.late_events} if self.late else self.tally.to_dict()
            with open(os.path.join(probes_dir, name), "w") as f:
                json.dump(data, f)

    class Sink(DynamicSink):
        def __init__(self, late: bool) -> None:
            self.late = late

        def build(self, step_id: str, worker_index: int, worker_count: int) -> Tally:
            return Tally(self.late)

    def event_time(value: tuple[int, int]) -> datetime:
        return T0 + timedelta(milliseconds=value[0] - wc.T0_MS)

    def add(acc: tuple[int, int], value: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + 1, acc[1] + value[1])

    def merge(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])

    flow = Dataflow("window")
    events = op.input("events", flow, Events())
    # Replayed data: the watermark must follow the events only (Flink's bounded
    # out-of-orderness), not wall time, so "now" stands still and nothing waits on the clock.
    clock = EventClock(
        event_time,
        wait_for_system_duration=timedelta(milliseconds=wc.BOUND_MS),
        now_getter=lambda: T0,
        to_system_utc=lambda _t: None,
    )
    windower = TumblingWindower(length=timedelta(milliseconds=wc.WINDOW_MS), align_to=T0)
    out = fold_window("windows", events, clock, windower, lambda: (0, 0), add, merge, False)
    op.output("tally", out.down, Sink(False))
    op.output("late", out.late, Sink(True))
    return flow


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work_dir)
    if args.processes > 1:
        bytewax_launch.run_cluster(args, __file__)
    else:
        bytewax_launch.run_dataflow(args, build_flow(args, str(Path(args.work_dir) / "probes")))
    end = time.time()
    result = common.result_template(args, SYSTEM)
    result["versions"]["bytewax"] = importlib.metadata.version("bytewax")
    result["events_per_second"] = args.events_per_second
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    probes = str(work / "probes")
    parts = [p for p in wc.read_tallies(probes) if "late" not in p]
    started = common.SCRIPT_START
    result.update(wc.result_fields(parts, args.records, args.events_per_second, started))
    late = 0
    for path in Path(probes).glob("late-*.json"):
        late += int(json.loads(path.read_text())["late"])
    result["late_events"] = late
    result["source_partitions"] = args.source_partitions
    result["note"] = (
        f"recovery on: snapshots every epoch ({args.checkpoint_interval_ms} ms); "
        "EventClock wait_for_system_duration = the 500 ms bound, a clock standing still; "
        f"{args.source_partitions} source partition(s) (its per-key watermark is not the "
        "minimum over partitions: with 2, events of the slower partition are dropped late)"
        + (f"; {late:,} events were late" if late else "")
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--events-per-second", type=int, required=True)
    parser.add_argument("--role", default="main", choices=("main", "process"))
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--source-partitions",
        type=int,
        default=1,
        help="partitions of the generator (default 1: see the module docstring)",
    )
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--addresses", default="")
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-bytewax-window-")
    if args.role == "process":
        bytewax_launch.run_dataflow(
            args,
            build_flow(args, str(Path(args.work_dir) / "probes")),
            args.process_id,
            args.addresses.split(","),
        )
        sys.stdout.flush()
        os._exit(0)
    if args.processes < 1 or args.parallelism % args.processes:
        raise SystemExit("--processes must divide --parallelism")
    result = run_job(args)
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
