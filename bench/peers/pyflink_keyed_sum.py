"""PyFlink 2.3 (thread mode) peer: keyed running sum in a ``KeyedProcessFunction``.

Invariant: the job is NumberSequenceSource -> Python map to Cairn's ``(key, 1)`` record ->
``key_by`` -> ``KeyedProcessFunction`` with a ``ValueState`` sum -> ``DiscardingSink``, at
parallelism 2; it prints one JSON result as its last stdout line. Run it through
``run_peer.py`` (which sets the venv, ``PYTHONPATH`` and the hard timeout).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import common
import recovery

SYSTEM = "pyflink"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest ``chk-N`` folder holding a ``_metadata`` file (a completed checkpoint)."""
    done = [p.parent for p in checkpoint_dir.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


class CheckpointPoller(threading.Thread):
    """Polls the MiniCluster's REST API for checkpoint history while the job runs."""

    def __init__(self, port: int, job_id: str) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/jobs/{job_id}/checkpoints"
        self.history: dict[int, dict[str, Any]] = {}
        self.summary: dict[str, Any] | None = None
        self.stop = threading.Event()

    def poll(self) -> None:
        try:
            with urllib.request.urlopen(self.url, timeout=2) as resp:
                data = json.load(resp)
        except Exception:
            return
        self.summary = data.get("summary") or self.summary
        for item in data.get("history", []):
            if item.get("status") == "COMPLETED":
                self.history[int(item["id"])] = item

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.poll()


def build_job(args: argparse.Namespace, work: Path, run_tag: str, restore: Path | None) -> Any:
    from pyflink.common import Configuration, Types
    from pyflink.common.watermark_strategy import WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import Sink
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.port", str(args.rest_port))
    conf.set_string("web.checkpoints.history", "10000")
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    if args.checkpoint_interval_ms > 0:
        conf.set_string("execution.checkpointing.interval", f"{args.checkpoint_interval_ms} ms")
        conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
        conf.set_string("execution.checkpointing.dir", (work / "checkpoints").as_uri())
        conf.set_string(
            "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION"
        )
        conf.set_string("state.backend.type", args.state_backend)
    if restore is not None:
        conf.set_string("execution.state-recovery.path", restore.as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)

    probes_dir = str(work / "probes")
    num_keys = args.keys
    rate_per_subtask = args.rate / args.parallelism if args.rate > 0 else 0.0
    latency = args.workload == "latency"
    track_sums = args.workload == "recovery"

    class ToRecord(MapFunction):
        """Index -> Cairn's record; paces itself when a rate is given (a rate-limited source:
        latency and recovery runs); only latency runs stamp the record with its time."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.next_due = time.time()

        def map(self, index: int) -> Any:
            if rate_per_subtask:
                self.next_due += 1.0 / rate_per_subtask
                delay = self.next_due - time.time()
                if delay > 0:
                    time.sleep(delay)
            if latency:
                return (common.key_of(index, num_keys), 1, time.time())
            return (common.key_of(index, num_keys), 1)

    class RunningSum(KeyedProcessFunction):
        """The user's function; it also counts records (the sink side) outside latency runs."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))
            # Latency runs count at the sink-side LatencyProbe instead (this one stays empty).
            self.probe = common.Probe(probes_dir, run_tag=f"{run_tag}keyed" if latency else run_tag)

        def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
            current = (self.total.value() or 0) + value[1]
            self.total.update(current)
            if latency:
                yield value[0], current, value[2]
                return
            self.probe.record()
            if track_sums:
                self.probe.final_sums[value[0]] = current
            yield value[0], current

        def close(self) -> None:
            self.probe.close()

    class LatencyProbe(MapFunction):
        """The sink side of latency runs: end-to-end latency from the record's creation."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.probe = common.Probe(probes_dir, latency=True, run_tag=run_tag)

        def map(self, value: Any) -> Any:
            self.probe.record(value[2])
            return value[1]

        def close(self) -> None:
            self.probe.close()

    record_type = (
        Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE()])
        if latency
        else Types.TUPLE([Types.STRING(), Types.LONG()])
    )
    source = NumberSequenceSource(0, args.records - 1)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    stream = stream.map(ToRecord(), output_type=record_type)
    sums = stream.key_by(lambda r: r[0], key_type=Types.STRING()).process(
        RunningSum(), output_type=record_type
    )
    if latency:
        sums = sums.map(LatencyProbe(), output_type=Types.LONG())
    sums.sink_to(Sink("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"))
    return env


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    """Run one job to completion (or until killed); returns its measurements."""
    import pyflink

    work = Path(args.work_dir)
    restore = latest_checkpoint(work / "checkpoints") if args.restore else None
    if args.restore and restore is None:
        raise SystemExit("no completed checkpoint to restore from")
    args.rest_port = free_port()
    env = build_job(args, work, args.run_tag, restore)
    client = env.execute_async(f"keyed-sum-{args.workload}")
    poller = CheckpointPoller(args.rest_port, str(client.get_job_id()))
    poller.start()
    client.get_job_execution_result().result()
    end = time.time()
    poller.stop.set()
    result = common.result_template(args, SYSTEM)
    result["versions"]["apache-flink"] = pyflink.version.__version__
    result["execution_mode"] = "thread"
    result["state_backend"] = args.state_backend
    result["restored_from"] = str(restore) if restore else None
    probes = common.collect_probes(str(work / "probes"), args.run_tag, args.latency_warmup_s)
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    if probes["first"] is not None:
        result["startup_s"] = round(probes["first"] - common.SCRIPT_START, 3)
    result["steady_records_per_s"] = probes["steady_records_per_s"]
    result["processed"] = probes["count"]
    result["final_sum_total"] = probes["final_sum_total"]
    common.latency_fields(result, probes["latencies_ms"])
    checkpoint_fields(result, poller, probes, args)
    return result


def checkpoint_fields(
    result: dict[str, Any], poller: CheckpointPoller, probes: dict[str, Any], args: Any
) -> None:
    if args.checkpoint_interval_ms <= 0:
        result["note"] = "checkpointing off"
        return
    done = [poller.history[k] for k in sorted(poller.history)]
    durations = [float(c["end_to_end_duration"]) for c in done]
    result["checkpoints_completed"] = len(done)
    result["checkpoint_p50_ms"] = common.percentile(durations, 50)
    result["checkpoint_p99_ms"] = common.percentile(durations, 99)
    if done:
        last = done[-1]
        result["checkpoint_last_ms"] = float(last["end_to_end_duration"])
        result["checkpoint_bytes"] = last.get("checkpointed_size")
        result["state_size_bytes"] = last.get("state_size")
        windows = [
            (c["trigger_timestamp"] / 1000.0, c["latest_ack_timestamp"] / 1000.0) for c in done
        ]
        series = common.throughput_series(probes["samples"])
        result["async_dip_pct"] = common.async_dip_pct(series, windows)
        result["async_windows"] = len(windows)
    result["note"] = (
        "checkpoint = end-to-end duration from Flink's REST checkpoint history "
        "(trigger to last acknowledgement)"
    )
    if done and result.get("async_dip_pct") is None:
        result["note"] += (
            "; async_dip_pct null: checkpoints ran back to back (each took about as long as "
            "the interval, barrier alignment under backpressure), leaving no checkpoint-free "
            "time to compare against"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--state-backend", default="hashmap", choices=("hashmap", "rocksdb"))
    parser.add_argument("--role", default="main", choices=("main", "job"))
    parser.add_argument("--run-tag", default="run")
    parser.add_argument("--restore", action="store_true")
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-pyflink-")
    common.keyed_sum_main(
        args,
        run_job,
        lambda a: recovery.run_recovery(a, SYSTEM, __file__),
        (
            "the whole local job (driver + MiniCluster JVM) is SIGKILLed and restarted by the "
            "harness from its latest retained checkpoint; recovery_s includes JVM start-up"
        ),
    )


if __name__ == "__main__":
    main()
