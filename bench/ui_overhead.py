"""What operating a job costs: the keyed sum with its control endpoint, the Prometheus
reporter and a client reading them as the web UI and a Prometheus server do ("on"), against
the same job with none of them ("off"), alternating ABBA in one process.

Invariant: both sides run the same job (``bench.workloads``' keyed sum, 1 s exactly-once
checkpoints) in one Spark session after a warm-up job, in the order off, on, on, off, off,
on, ...; only medians and their ratio are reported. What "off" cannot remove: every task's
per-batch counters and its time accounting, and the worker's report once a second, are part
of the runtime (they feed failover and the progress line too); "on" adds everything that
serves them.

The "on" client, from the driver process as a browser on the same machine would be: the web
UI's calls (overview, job, checkpoints, per vertex backpressure and metrics) every
``poll_s``, one scrape of the endpoint's and the reporter's ``/metrics`` each, and a live
event stream (``/jobs/:jobid/events``) read for the whole run::

    python -m bench.ui_overhead --records 4000000 --repeat 4     # 8 runs, prints JSON last
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench.ab import alternating_order
from bench.cairn_functions import KeyedSum, ProgressSink
from bench.measure import Progress, read_progress
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import CheckpointingMode, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource
from cairn.rest.client import JobEndpoint
from cairn.rest.registry import JobRegistry

__all__ = ["UiClient", "main", "run_side"]

INTERVAL_MS = 1000


@dataclass
class UiClient:
    """Reads a running job's endpoint like the web UI (every ``poll_s``) and Prometheus
    (``/metrics`` of the endpoint and of the reporter), and holds its event stream open."""

    endpoint: JobEndpoint
    prom_port: int | None
    running: Callable[[], bool]  # errors after the job ended (servers closing) are expected
    poll_s: float = 1.0
    requests: int = 0
    events: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._poll, name="ui-poll", daemon=True).start()
        threading.Thread(target=self._stream, name="ui-events", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _get(self, path: str) -> Any:
        self.requests += 1
        return self.endpoint.request("GET", path)

    def _text(self, url: str, token: str | None) -> None:
        req = urllib.request.Request(url)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=10) as response:
            response.read()
        self.requests += 1

    def _poll(self) -> None:
        jid = self.endpoint.entry.job_id
        base = self.endpoint.entry.endpoint
        while not self._stop.wait(self.poll_s):
            try:
                self._get("/jobs/overview")
                job = self._get(f"/jobs/{jid}")
                self._get(f"/jobs/{jid}/checkpoints")
                for v in job["vertices"]:
                    self._get(f"/jobs/{jid}/vertices/{v['id']}/backpressure")
                    names = ",".join(
                        f"{i}.{m}"
                        for i in range(v["parallelism"])
                        for m in ("numRecordsIn", "numRecordsOut")
                    )
                    self._get(f"/jobs/{jid}/vertices/{v['id']}/metrics?get={names}")
                self._text(base + "/metrics", self.endpoint.entry.token)
                if self.prom_port is not None:
                    self._text(f"http://127.0.0.1:{self.prom_port}/metrics", None)
            except Exception as e:  # the job ending closes the servers: stop quietly
                if self.running():
                    self.errors.append(f"{type(e).__name__}: {e}")
                return

    def _stream(self) -> None:
        entry = self.endpoint.entry
        req = urllib.request.Request(f"{entry.endpoint}/jobs/{entry.job_id}/events")
        if entry.token:
            req.add_header("Authorization", f"Bearer {entry.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                for line in response:
                    if line.startswith(b"data:"):
                        self.events += 1
                    if self._stop.is_set():
                        return
        except Exception as e:
            if self.running():
                self.errors.append(f"events: {type(e).__name__}: {e}")


def tree_cpu_s() -> dict[int, float]:
    """CPU seconds (user + system) of this process and every live descendant (the Spark JVM,
    its Python daemon and workers) by pid."""
    me = psutil.Process()
    cpu: dict[int, float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            cpu[proc.pid] = t.user + t.system
        except psutil.Error:
            continue  # ended meanwhile
    return cpu


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keyed_sum_env(conf: Configuration, parallelism: int, checkpoint_dir: str) -> Any:
    """``bench.workloads``' keyed-sum environment: 1 s exactly-once checkpoints on file
    storage, a fixed-delay restart strategy, plus ``conf``."""
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(INTERVAL_MS, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage("file://" + checkpoint_dir)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    return env


def run_side(
    on: bool, records: int, keys: int, executor: str, work_dir: str, poll_s: float
) -> dict[str, Any]:
    """One keyed-sum run (generator -> key_by -> running sum in ValueState -> the measuring
    sink, as ``bench.workloads``' keyed sum) with everything that serves metrics and the UI
    on, or all of it off; ``steady_records_per_s`` from the sinks' progress files."""
    conf = Configuration()
    conf.set_string("cairn.executor", executor)
    conf.set_string("cairn.rest.enabled", "true" if on else "false")
    prom_port = _free_port() if on else None
    if prom_port is not None:
        conf.set_string("metrics.reporters", "prom")
        conf.set_string("metrics.reporter.prom.port", str(prom_port))
    env = keyed_sum_env(conf, 2, os.path.join(work_dir, "checkpoints"))
    out = os.path.join(work_dir, "sink")
    os.makedirs(out, exist_ok=True)
    (
        env.from_source(
            DataGeneratorSource.keyed_values(records, keys),
            WatermarkStrategy.no_watermarks(),
            "generator",
        )
        .uid("generator")
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(KeyedSum(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .uid("keyed-sum")
        .name("keyed sum")
        .add_sink(ProgressSink(out))
        .uid("discarding-sink")
    )
    cpu_before, wall_before = time.process_time(), time.monotonic()
    tree_before = tree_cpu_s()
    client = env.execute_async(f"bench-ui-{'on' if on else 'off'}")
    master = client.job_master
    ui: UiClient | None = None
    while master.end_ms is None:
        if on and ui is None:
            entry = JobRegistry().find(master.job_id)
            if entry is not None:
                running = lambda: not master.status.is_globally_terminal_state()  # noqa: E731
                ui = UiClient(JobEndpoint(entry), prom_port, running, poll_s)
                ui.start()
        time.sleep(0.1)
    client.get_job_execution_result(timeout=60)
    # The driver's CPU (all its threads: job master, endpoint, reporter, the client itself)
    # per second of the job: what serving costs, less noisy than the rate on a shared machine.
    driver_cpu = (time.process_time() - cpu_before) / (time.monotonic() - wall_before)
    # Everything the job cost the machine (workers that exited meanwhile are not counted:
    # Spark reuses its Python workers, so few do), per million records: load-independent.
    tree_after = tree_cpu_s()
    tree = sum(t - tree_before.get(pid, 0.0) for pid, t in tree_after.items())
    if ui is not None:
        ui.stop()
    rate = Progress.of(read_progress(out).values()).steady_rate(records)
    result: dict[str, Any] = {
        "side": "on" if on else "off",
        "steady_records_per_s": None if rate is None else round(rate),
        "restarts": master.restarts,
        "driver_cpu_per_s": round(driver_cpu, 4),
        "cpu_s_per_million": round(tree / records * 1e6, 3),
    }
    if on:
        result["ui_requests"] = ui.requests if ui else 0
        result["ui_events"] = ui.events if ui else 0
        result["ui_errors"] = ui.errors[:3] if ui else ["no client: the job never registered"]
    return result


def _median(runs: list[dict[str, Any]], side: str, name: str) -> float:
    return round(statistics.median(r[name] for r in runs if r["side"] == side), 4)


def paired_ratio(order: list[tuple[str, float]]) -> float | None:
    """Median of on/off over consecutive pairs of runs (ABBA: each pair ran side by side, so
    a drift of the machine's load between pairs cancels out).

    >>> paired_ratio([("off", 100.0), ("on", 90.0), ("on", 120.0), ("off", 100.0)])
    1.05
    """
    ratios = []
    for (a, ra), (b, rb) in zip(order[::2], order[1::2], strict=False):
        if {a, b} == {"on", "off"} and ra > 0 and rb > 0:
            on, off = (ra, rb) if a == "on" else (rb, ra)
            ratios.append(on / off)
    return round(statistics.median(ratios), 4) if ratios else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_overhead", description=__doc__)
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=4, help="runs of each side (ABBA)")
    parser.add_argument("--poll-s", type=float, default=1.0, help="the client's poll period")
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = args.work_dir or tempfile.mkdtemp(prefix="cairn-ui-overhead-")
    started = time.time()
    load_before = os.getloadavg()
    warm = os.path.join(work, "warm")
    run_side(False, max(args.records // 10, 1), args.keys, args.executor, warm, 1.0)
    rates: dict[str, list[float]] = {"off": [], "on": []}
    order: list[tuple[str, float]] = []
    runs: list[dict[str, Any]] = []
    for i, side in enumerate(alternating_order(args.repeat)):
        name = "off" if side == "a" else "on"
        run = run_side(
            name == "on",
            args.records,
            args.keys,
            args.executor,
            os.path.join(work, f"run-{i}"),
            args.poll_s,
        )
        rate = float(run["steady_records_per_s"] or 0.0)
        rates[name].append(rate)
        order.append((name, rate))
        runs.append(run)
        extra = ""
        if name == "on":
            extra = (
                f" ({run['ui_requests']} requests, {run['ui_events']} events, {run['ui_errors']})"
            )
        print(
            f"{i + 1:2d} {name:3s} {rate:>10,.0f} records/s  driver CPU "
            f"{run['driver_cpu_per_s']:.3f} s/s  all CPU {run['cpu_s_per_million']:.2f} s/M "
            f"load {os.getloadavg()[0]:.2f}{extra}",
            file=sys.stderr,
            flush=True,
        )
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    summary = {
        "workload": "ui-overhead",
        "records": args.records,
        "keys": args.keys,
        "repeat": args.repeat,
        "poll_s": args.poll_s,
        "median_off": round(off),
        "median_on": round(on),
        "on_off_ratio": round(on / off, 4) if off else None,
        "overhead_pct": round(100.0 * (1.0 - on / off), 1) if off else None,
        "paired_ratio_median": paired_ratio(order),
        "runs_off": [round(r) for r in rates["off"]],
        "runs_on": [round(r) for r in rates["on"]],
        "driver_cpu_per_s_off": _median(runs, "off", "driver_cpu_per_s"),
        "driver_cpu_per_s_on": _median(runs, "on", "driver_cpu_per_s"),
        "cpu_s_per_million_off": _median(runs, "off", "cpu_s_per_million"),
        "cpu_s_per_million_on": _median(runs, "on", "cpu_s_per_million"),
        "ui_requests": sum(r.get("ui_requests", 0) for r in runs),
        "ui_events": sum(r.get("ui_events", 0) for r in runs),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "elapsed_s": round(time.time() - started, 1),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
