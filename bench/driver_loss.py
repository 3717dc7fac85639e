"""Time to recover after a driver loss: SIGKILL ``cairn run`` (its whole process group) while
a keyed job holds ``--keys`` keys of state, start the same command again at once (as a
supervisor would) and time each phase until every worker runs with the restored state.

Invariant: the job, the command and the storage are the same in both runs (no ``-s``): the
rerun finds the lost run's checkpoint by itself; every figure comes from wall-clock times of
this process and of the new driver's own log lines (same clock, one machine).

    python -m bench.driver_loss                    # 1,000,000 keys, local Spark
    python -m bench.driver_loss --keys 100000 --repeat 3

Phases: *detect* (the kill until the supervisor sees the driver gone), *new driver* (the new
process starts, Spark starts, the job is planned, the checkpoint is chosen and verified: until
the "resumes from checkpoint" line), *restore* (until every worker runs with the restored
state: the job master's "restored checkpoint" line). The last JSON line is the result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

JOB = """
import sys
from cairn.common import Types, WatermarkStrategy
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.functions import SinkFunction
from cairn.datastream.state import ValueStateDescriptor


class Discard(SinkFunction):
    def invoke(self, value, context):
        pass


class Keys:
    def __init__(self, keys):
        self.keys = keys

    def __call__(self, index):
        return (index % self.keys, index)

    def generate_batch(self, indices):
        k = self.keys
        return [(i % k, i) for i in indices]


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        return ()


checkpoints, keys, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(2000)
config = env.get_checkpoint_config()
config.set_checkpoint_storage("file://" + checkpoints)
config.set_min_pause_between_checkpoints(1000)
source = DataGeneratorSource(Keys(keys), 10**12, RateLimiterStrategy.per_second(rate))
(env.from_source(source, WatermarkStrategy.no_watermarks(), "keys").uid("keys")
    .key_by(lambda r: r[0]).process(Count()).uid("count")
    .add_sink(Discard()).uid("discard"))
env.execute("driver-loss-bench")
"""

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_SOURCE_OUT = re.compile(r"source out ([\d.]+)([kM]?)")
_COMPLETED = re.compile(r"Completed checkpoint (\d+) \((\d+) bytes")


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    if m is None:
        return None
    local = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
    return local.timestamp()


class Run:
    """One ``cairn run -v`` in its own process group; its stderr lines with arrival times."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.started = time.time()
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        buffer = b""
        while chunk := self.proc.stderr.read1(65536):  # type: ignore[attr-defined]
            buffer += chunk
            *done, buffer = re.split(rb"[\r\n]", buffer)
            now = time.time()
            self.lines.extend((now, d.decode("utf-8", "replace")) for d in done if d)

    def emitted(self) -> float:
        """Records the sources emitted so far (the progress line's "source out")."""
        for _, line in reversed(self.lines):
            if m := _SOURCE_OUT.search(line):
                scale = {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]
                return float(m.group(1)) * scale
        return 0.0

    def first(self, needle: str, after: float = 0.0) -> tuple[float, str] | None:
        for arrived, line in self.lines:
            if needle in line and arrived >= after:
                return _stamp(line) or arrived, line
        return None

    def wait_for(self, needle: str, timeout: float, after: float = 0.0) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        while (found := self.first(needle, after)) is None:
            if self.proc.poll() is not None:
                tail = "\n".join(line for _, line in self.lines[-20:])
                raise RuntimeError(f"the driver ended (exit {self.proc.returncode}):\n{tail}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {needle!r} within {timeout} s")
            time.sleep(0.02)
        return found

    def kill(self) -> float:
        """SIGKILL the process group; the time the driver was seen gone."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return time.time()


def measure(keys: int, rate: float, work: Path) -> dict[str, Any]:
    checkpoints = work / "checkpoints"
    script = work / "job.py"
    script.write_text(JOB)
    cairn = Path(sys.executable).with_name("cairn")
    cli = [str(cairn)] if cairn.exists() else [sys.executable, "-m", "cairn.cli.main"]
    argv = [*cli, "-v", "run", str(script), "--", str(checkpoints), str(keys), str(rate)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    first = Run(argv, env)
    try:
        deadline = time.monotonic() + 600
        while first.emitted() < keys * 1.05:  # every key has state (keys cycle)
            if first.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the first run never held every key")
            time.sleep(0.2)
        filled = time.time()
        _, line = first.wait_for("Completed checkpoint", 120, after=filled)
        m = _COMPLETED.search(line)
        assert m is not None
        checkpoint, state_bytes = int(m.group(1)), int(m.group(2))
        killed = time.time()
        gone = first.kill()
    finally:
        if first.proc.poll() is None:
            os.killpg(first.proc.pid, signal.SIGKILL)
    second = Run(argv, env)  # the supervisor restarts it at once
    try:
        chosen, _ = second.wait_for("resumes from checkpoint", 300)
        running, line = second.wait_for("restored checkpoint", 300)
    finally:
        if second.proc.poll() is None:
            os.killpg(second.proc.pid, signal.SIGKILL)
            second.proc.wait()
    restored = re.search(r"resumes from checkpoint (\d+)", second.first("resumes from")[1])  # type: ignore[index]
    return {
        "keys": keys,
        "checkpoint": checkpoint,
        "restored_checkpoint": int(restored.group(1)) if restored else None,
        "state_bytes": state_bytes,
        "detect_s": round(gone - killed, 3),
        "new_driver_s": round(chosen - second.started, 3),
        "restore_s": round(running - chosen, 3),
        "total_s": round(running - killed, 3),
        "restore_line": line.split(": ", 1)[-1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=150_000, help="records per second")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    results = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="cairn-driver-loss-") as work:
            result = measure(args.keys, args.rate, Path(work))
            print(json.dumps(result), flush=True)
            results.append(result)
    totals = sorted(r["total_s"] for r in results)
    summary = {
        "runs": len(results),
        "median_total_s": totals[len(totals) // 2],
        "load": os.getloadavg(),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
