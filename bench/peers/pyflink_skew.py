"""PyFlink 2.3 (thread mode) peer of ``cairn demo skew``: seed 000's checkpoint-alignment job.

Invariant: the job is NumberSequenceSource (unbounded in practice) -> Python map to seed 000's
value (``2`` once per 1,000 records, else ``1``) -> ``key_by(lambda v: v % 2 == 0)`` ->
Python map spinning ``--record-cost-ms`` per record that counts values in keyed state ->
``DiscardingSink``, parallelism 2, one checkpoint variant (aligned, unaligned, aligned with
an alignment timeout, unaligned with buffer debloating); it runs ``--seconds`` after the job
is RUNNING, is cancelled, and prints one JSON result as its last stdout line, with every
checkpoint seen in Flink's REST history as ``samples`` (the fields of Cairn's
``CheckpointSample``), so ``bench/skew.py`` tabulates both systems with the same code.

PyFlink's Python functions have no operator state (``CheckpointedFunction``): the seed's
``map2`` counter lives in keyed ``ValueState`` of the busy map instead (same information:
one count per value). Run it through ``python -m bench.skew --system pyflink`` (which sets
the venv, ``PYTHONPATH`` and the hard timeout), or directly with the venv's Python and
``PYTHONPATH=bench/peers:<venv site-packages>``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import common

SYSTEM = "pyflink"
VARIANTS = ("aligned", "unaligned", "timeout", "debloat")
SKEW_RATIO = 1_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return json.load(resp)
    except Exception:
        return None


def _max_of(summary: Any, *path: str) -> int:
    """``summary[path...]["max"]`` of a Flink REST statistics summary, 0 when absent."""
    node = summary
    for name in path:
        node = node.get(name) if isinstance(node, dict) else None
    return int(node.get("max") or 0) if isinstance(node, dict) else 0


class CheckpointHistory:
    """Every checkpoint in the MiniCluster's REST history; details fetched once it ended."""

    def __init__(self, port: int, job_id: str) -> None:
        self.base = f"http://127.0.0.1:{port}/jobs/{job_id}"
        self.samples: dict[int, dict[str, Any]] = {}
        self.finished: set[int] = set()

    def poll(self) -> None:
        data = get_json(self.base + "/checkpoints")
        for item in (data or {}).get("history", []):
            cid = int(item["id"])
            if cid in self.finished:
                continue
            status = str(item.get("status", "IN_PROGRESS"))
            sample = {
                "checkpoint_id": cid,
                "status": status,
                "end_to_end_ms": int(item.get("end_to_end_duration") or 0),
                "alignment_ms": 0,
                "start_delay_ms": 0,
                "persisted_bytes": int(item.get("persisted_data") or 0),
                "unaligned": bool(
                    item.get("is_unaligned")
                    or item.get("checkpoint_type") == "UNALIGNED_CHECKPOINT"
                ),
                "failure_reason": item.get("failure_message"),
            }
            if status != "IN_PROGRESS":
                sample["alignment_ms"], sample["start_delay_ms"] = self._slowest(cid)
                self.finished.add(cid)
            self.samples[cid] = sample

    def _slowest(self, cid: int) -> tuple[int, int]:
        """Max alignment duration and start delay over all subtasks of checkpoint ``cid``."""
        details = get_json(f"{self.base}/checkpoints/details/{cid}") or {}
        alignment = delay = 0
        for vertex in details.get("tasks") or {}:
            sub = get_json(f"{self.base}/checkpoints/details/{cid}/subtasks/{vertex}") or {}
            summary = sub.get("summary") or {}
            alignment = max(alignment, _max_of(summary, "alignment", "duration"))
            delay = max(delay, _max_of(summary, "start_delay"))
        return alignment, delay


def build_job(args: argparse.Namespace) -> Any:
    from pyflink.common import Configuration, Duration, Types
    from pyflink.common.watermark_strategy import WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import Sink
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    work = Path(args.work_dir)
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.port", str(args.rest_port))
    conf.set_string("web.checkpoints.history", "10000")
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    conf.set_string("execution.checkpointing.dir", (work / "checkpoints").as_uri())
    if args.variant == "debloat":
        conf.set_string("taskmanager.network.memory.buffer-debloat.enabled", "true")
        conf.set_string("taskmanager.network.memory.buffer-debloat.target", "1 s")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.checkpoint_interval_ms)
    config = env.get_checkpoint_config()
    config.set_checkpoint_timeout(60_000)
    config.set_tolerable_checkpoint_failure_number(1_000)
    if args.variant != "aligned":
        config.enable_unaligned_checkpoints()
    if args.variant == "timeout":
        config.set_aligned_checkpoint_timeout(Duration.of_millis(args.alignment_timeout_ms))

    cost_s = args.record_cost_ms / 1000.0
    probes_dir = str(work / "probes")

    class BusyCountingMap(MapFunction):
        """Seed 000's busy loop, and its per-value counter (here in keyed state)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
            self.probe = common.Probe(probes_dir)  # records into the map, for records/s

        def map(self, value: int) -> int:
            self.count.update((self.count.value() or 0) + 1)
            self.probe.record()
            end = time.perf_counter() + cost_s
            while time.perf_counter() < end:
                pass
            return value

    source = NumberSequenceSource(0, 2**62)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda i: 2 if i % SKEW_RATIO == 0 else 1, output_type=Types.INT())
        .name("skewed values")
        .key_by(lambda v: v % 2 == 0, key_type=Types.BOOLEAN())
        .map(BusyCountingMap(), output_type=Types.INT())
        .name("map1")
        .sink_to(Sink("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"))
    )
    return env


def run(args: argparse.Namespace) -> dict[str, Any]:
    import pyflink

    args.rest_port = free_port()
    env = build_job(args)
    client = env.execute_async(f"skew-{args.variant}")
    history = CheckpointHistory(args.rest_port, str(client.get_job_id()))
    deadline = time.time() + 120
    while getattr(client.get_job_status().result(), "name", "") != "RUNNING":
        if time.time() > deadline:
            raise SystemExit("the job did not reach RUNNING within 120 s")
        time.sleep(0.1)
    started = time.time()
    while time.time() - started < args.seconds:
        history.poll()
        time.sleep(0.5)
    history.poll()
    seconds = time.time() - started
    records, _ = common.read_progress(str(Path(args.work_dir) / "probes"), "run")
    client.cancel().result()

    result: dict[str, Any] = dict.fromkeys(common.RESULT_FIELDS)
    result.update(
        system=SYSTEM,
        workload="skew",
        records=0,
        variant=args.variant,
        versions={"python": sys.version.split()[0], "apache-flink": pyflink.version.__version__},
        execution_mode="thread",
        parallelism=args.parallelism,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        alignment_timeout_ms=args.alignment_timeout_ms,
        record_cost_ms=args.record_cost_ms,
        seconds=round(seconds, 3),
        elapsed_s=round(time.time() - common.SCRIPT_START, 3),
        records_in=records,
        samples=[history.samples[k] for k in sorted(history.samples)],
        note="counter in keyed ValueState (PyFlink has no operator state for Python "
        "functions); checkpoint figures from Flink's REST checkpoint history",
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=2000)
    parser.add_argument("--alignment-timeout-ms", type=int, default=1000)
    parser.add_argument("--record-cost-ms", type=float, default=1.0)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--work-dir", default="")
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-pyflink-skew-")
    common.emit(run(args))
    sys.stdout.flush()
    os._exit(0)  # skip py4j's slow interpreter teardown; the JVM gateway exits with us


if __name__ == "__main__":
    main()
