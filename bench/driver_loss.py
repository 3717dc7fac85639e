"""Time to recover after a driver loss: SIGKILL ``cairn run`` (its whole process group) while
a keyed job holds ``--keys`` keys of state and time each phase until every worker runs with
the restored state, in one of two set-ups:

* ``--mode standby`` (default): high availability; a second ``cairn run`` of the same job
  stands by (warm: Spark session and Python workers ready) and takes over when the killed
  leader's lease lapses. Phases: *detection* (the kill until the standby holds the lease:
  the lease lapsing, plus a poll), *new leader* (claiming the HA pointer, planning the run,
  choosing and verifying the checkpoint), *scheduling* (Spark starting the workers of the
  barrier stage), *restore* (the workers connect, read the checkpoint's metadata and state).
* ``--mode restart``: no standby; the same command is started again at once (as a supervisor
  would). Phases: *detect* (the supervisor sees the driver gone), *new driver* (process,
  Spark, planning, choosing and verifying: the "resumes from checkpoint" line), *restore*
  (until every worker runs with the restored state).

Invariant: the job, the command and the storage are the same for every driver (no ``-s``):
the new one finds the lost run's checkpoint by itself; every figure comes from wall-clock
times of this process and of the drivers' own log lines (same clock, one machine).

    python -m bench.driver_loss                    # 1,000,000 keys, standby, local Spark
    python -m bench.driver_loss --mode restart --keys 100000 --repeat 3

The last JSON line is the result.
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


def _command(keys: int, rate: float, work: Path, ha: list[str]) -> tuple[list[str], dict[str, str]]:
    checkpoints = work / "checkpoints"
    script = work / "job.py"
    script.write_text(JOB)
    cairn = Path(sys.executable).with_name("cairn")
    cli = [str(cairn)] if cairn.exists() else [sys.executable, "-m", "cairn.cli.main"]
    argv = [*cli, "-v", "run", *ha, str(script), "--", str(checkpoints), str(keys), str(rate)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return argv, env


def _fill_and_kill(first: Run, keys: int) -> tuple[int, int, float, float]:
    """Wait until every key has state and a checkpoint holds it, then SIGKILL ``first``:
    (checkpoint id, its bytes, when the kill was sent, when the driver was seen gone)."""
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
        killed = time.time()
        gone = first.kill()
        return int(m.group(1)), int(m.group(2)), killed, gone
    finally:
        if first.proc.poll() is None:
            os.killpg(first.proc.pid, signal.SIGKILL)


_RESTORED = re.compile(
    r"restored checkpoint (\d+) in (\d+) ms: choosing and verifying it (\d+) ms, the last "
    r"worker started (\d+) ms after the launch, its metadata (\d+) ms, its state (\d+) ms"
)


_WARM_PIDS = re.compile(r"ready for a takeover \(pids ([\d, ]+)\)")


def _profile(pids: list[int], out: Path) -> list[subprocess.Popen[bytes]]:
    """``py-spy record`` (raw collapsed stacks, 100 Hz, idle threads left out) of ``pids``."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    return [
        subprocess.Popen(
            [spy, "record", "--format", "raw", "-r", "100", "-p", str(pid), "-o", str(out / name)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in zip(
            [f"driver-{pids[0]}.txt", *(f"worker-{p}.txt" for p in pids[1:])], pids, strict=True
        )
    ]


def hot_frames(raw: Path, top: int = 12) -> list[tuple[str, int]]:
    """The frames with the most samples (inclusive) in a ``py-spy --format raw`` file."""
    counts: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        for frame in set(stack.split(";")):
            counts[frame] = counts.get(frame, 0) + int(n)
    return sorted(counts.items(), key=lambda kv: -kv[1])[:top]


def measure_standby(
    keys: int,
    rate: float,
    work: Path,
    lease_ms: int | None,
    renew_ms: int | None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Leader and warm standby; SIGKILL the leader; time the standby's takeover
    (``profile``: py-spy profiles of the standby and its warm workers go there)."""
    ha = ["-Dhigh-availability.type=STORAGE"]
    if lease_ms:
        ha.append(f"-Dhigh-availability.lease-duration={lease_ms} ms")
    if renew_ms:
        ha.append(f"-Dhigh-availability.lease-renew-interval={renew_ms} ms")
    argv, env = _command(keys, rate, work, ha)
    leader = Run(argv, env)
    standby: Run | None = None
    try:
        leader.wait_for("leading this job", 300)
        standby = Run(argv, env)
        standby.wait_for("standing by", 300)
        _, ready = standby.wait_for("ready for a takeover", 300)  # its Python workers are warm
        spies: list[subprocess.Popen[bytes]] = []
        if profile is not None:
            m = _WARM_PIDS.search(ready)
            warm_pids = [int(p) for p in m.group(1).split(", ")] if m else []
            spies = _profile([standby.proc.pid, *warm_pids], profile)
        checkpoint, state_bytes, killed, _ = _fill_and_kill(leader, keys)
        leading, _ = standby.wait_for("leading this job with fencing token", 120, after=killed)
        running, line = standby.wait_for("restored checkpoint", 300, after=killed)
        _, warm = standby.wait_for("the standby kept warm", 30, after=killed)
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(60)
    finally:
        for run in (leader, standby):
            if run is not None and run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
                run.proc.wait()
    m = _RESTORED.search(line)
    assert m is not None, line
    cid, total, choose, started = (int(m.group(i)) / 1000 for i in (1, 2, 3, 4))
    chosen = running - total + choose  # the new leader chose and verified the checkpoint
    return {
        "mode": "standby",
        "keys": keys,
        "checkpoint": checkpoint,
        "restored_checkpoint": int(cid * 1000),
        "state_bytes": state_bytes,
        "detection_s": round(leading - killed, 3),
        "new_leader_s": round(chosen - leading, 3),
        "scheduling_s": round(started, 3),
        "restore_s": round(total - choose - started, 3),
        "total_s": round(running - killed, 3),
        "restore_line": line.split(": ", 1)[-1],
        "warm_workers": warm.split(": ", 1)[-1],
    }


def measure(keys: int, rate: float, work: Path) -> dict[str, Any]:
    """No standby: SIGKILL the driver and start the same command again at once."""
    argv, env = _command(keys, rate, work, [])
    first = Run(argv, env)
    checkpoint, state_bytes, killed, gone = _fill_and_kill(first, keys)
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
        "mode": "restart",
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
    parser.add_argument("--mode", choices=("standby", "restart"), default="standby")
    parser.add_argument("--lease-ms", type=int, help="default: Cairn's lease-duration")
    parser.add_argument("--renew-ms", type=int, help="default: Cairn's lease-renew-interval")
    parser.add_argument(
        "--profile", type=Path, help="standby: py-spy profiles of the takeover go to this dir"
    )
    args = parser.parse_args(argv)
    results = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="cairn-driver-loss-") as work:
            if args.mode == "standby":
                result = measure_standby(
                    args.keys, args.rate, Path(work), args.lease_ms, args.renew_ms, args.profile
                )
            else:
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
