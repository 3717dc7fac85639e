"""Run one peer workload in its own venv, bounded in time; relay its JSON result.

Invariant: whatever happens (success, crash, timeout, missing venv), the last stdout line is
one JSON object with the shared result fields; the peer's process group is always gone when
this returns.

    python bench/peers/run_peer.py --system pyflink --workload keyed-sum \\
        --records 2000000 --keys 10000 --checkpoint-interval-ms 1000 --parallelism 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS_ROOT = HERE.parent / ".peers"
SCRIPTS = {
    "pyflink": "pyflink_keyed_sum.py",
    "spark": "spark_keyed_sum.py",
    "bytewax": "bytewax_keyed_sum.py",
    "bytewax-2p": "bytewax_keyed_sum.py",
}
# The window workload's scripts (bench/windows.py); spark-tws runs only that workload.
WINDOW_SCRIPTS = {
    "pyflink": "pyflink_window.py",
    "spark": "spark_window.py",
    "spark-tws": "spark_window.py",
    "bytewax": "bytewax_window.py",
    "bytewax-2p": "bytewax_window.py",
}
# The Kafka job benchmark's scripts (bench/kafka_job.py passes the broker and topics).
KAFKA_SCRIPTS = {"pyflink": "pyflink_kafka_job.py", "spark": "spark_kafka_job.py"}
# The Table API benchmark's scripts (bench/table.py), one per system for both workloads.
TABLE_SCRIPTS = {"pyflink": "pyflink_table.py", "spark": "spark_table.py"}
# The Nexmark benchmark's scripts (bench/nexmark_bench.py passes the query and the files).
NEXMARK_SCRIPTS = {"pyflink": "pyflink_nexmark.py", "spark": "spark_nexmark.py"}
# Variants of a peer: (its venv, extra arguments of its script).
VARIANTS = {
    "bytewax-2p": ("bytewax", ["--processes", "2"]),
    "spark-tws": ("spark", ["--api", "transformWithState"]),
}

sys.path.insert(0, str(HERE))
import common  # noqa: E402


def venv_python(system: str) -> Path:
    return PEERS_ROOT / system / "bin" / "python"


def site_packages(system: str) -> Path:
    found = sorted((PEERS_ROOT / system / "lib").glob("python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages in {PEERS_ROOT / system}")
    return found[-1]


def peer_env(system: str) -> dict[str, str]:
    """The environment a peer needs (see the known traps in bench/peers/README.md)."""
    env = dict(os.environ)
    python = str(venv_python(system))
    paths = [str(HERE)]
    if system == "pyflink":
        # Thread mode embeds CPython in the JVM, which does not see the venv by itself.
        paths.append(str(site_packages(system)))
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    if system == "spark":
        env["PYSPARK_PYTHON"] = python
        env["PYSPARK_DRIVER_PYTHON"] = python
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.pop("SPARK_HOME", None)  # the venv's pyspark brings its own Spark
    env.pop("FLINK_HOME", None)
    env["VIRTUAL_ENV"] = str(PEERS_ROOT / system)
    env["PATH"] = f"{PEERS_ROOT / system / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PEER_LAUNCH_TIME"] = repr(time.time())
    return env


def failure(args: argparse.Namespace, **fields: Any) -> dict[str, Any]:
    result = common.result_template(args, args.system)
    result.update(fields)
    return result


def last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    return None


def run(args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    """Run the peer; returns its result (or a result with ``error`` / ``unsupported``)."""
    venv, variant_args = VARIANTS.get(args.system, (args.system, []))
    result = _run(args, venv, [*variant_args, *extra])
    result["system"] = args.system
    return result


def _run(args: argparse.Namespace, venv: str, extra: list[str]) -> dict[str, Any]:
    python = venv_python(venv)
    if not python.exists():
        return failure(
            args, unsupported=f"{args.system} is not installed: run bash bench/peers/install.sh"
        )
    scripts = {
        "window": WINDOW_SCRIPTS,
        "kafka-job": KAFKA_SCRIPTS,
        "table-wordcount": TABLE_SCRIPTS,
        "table-window": TABLE_SCRIPTS,
        "nexmark": NEXMARK_SCRIPTS,
    }.get(args.workload, SCRIPTS)
    if args.system not in scripts:
        return failure(args, unsupported=f"{args.system} does not run the {args.workload} workload")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix=f"peer-{args.system}-"))
    work.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(python),
        str(HERE / scripts[args.system]),
        "--workload", args.workload,
        "--records", str(args.records),
        "--keys", str(args.keys),
        "--checkpoint-interval-ms", str(args.checkpoint_interval_ms),
        "--rate", str(args.rate),
        "--parallelism", str(args.parallelism),
        "--latency-warmup-s", str(args.latency_warmup_s),
        "--work-dir", str(work),
        *(["--kill-after-s", str(args.kill_after_s)] if args.kill_after_s else []),
        *extra,
    ]  # fmt: skip
    log_path = work / "peer.log"
    started = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, env=peer_env(venv),
            start_new_session=True, cwd=str(work),
        )  # fmt: skip
        try:
            out, _ = proc.communicate(timeout=args.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            out = b""
        finally:
            kill_group(proc)
    text = out.decode(errors="replace")
    with open(log_path, "a") as log:
        log.write("\n--- stdout ---\n" + text)
    if timed_out:
        return failure(args, error=f"timed out after {args.timeout:.0f} s", log=str(log_path))
    result = last_json_line(text)
    if result is None:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        return failure(
            args, error=f"exit code {proc.returncode}, no JSON result", log=str(log_path),
            log_tail="\n".join(tail),
        )  # fmt: skip
    result.setdefault("wall_s", round(time.time() - started, 3))
    result["log"] = str(log_path)
    if not args.keep and not args.work_dir and result.get("error") is None:
        shutil.rmtree(work, ignore_errors=True)
        result.pop("work_dir", None)
        result.pop("log", None)
    return result


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the peer's process group, then SIGKILL what is left after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.time() + grace
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True, choices=sorted({*SCRIPTS, *WINDOW_SCRIPTS}))
    common.add_common_args(parser)
    parser.add_argument("--timeout", type=float, default=900.0, help="hard limit, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args, extra = parser.parse_known_args(argv)
    result = run(args, extra)
    common.emit(result)
    return 0 if result.get("error") is None else 1


if __name__ == "__main__":
    sys.exit(main())
