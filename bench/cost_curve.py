"""Cost at a rate: CPU and latency of one small keyed-count job offered 10 to 100,000 records/s,
Cairn beside Bytewax and PyFlink in one run.

Invariant: every system runs the same job — a paced generator (records stamped with their
schedule), ``key_by``, a count per key in keyed state, a file sink writing
``key,count,created_ns,arrival_ns`` exactly once, parallelism 2, 1 s checkpoints (Bytewax: 1 s
epochs) — in a process group of its own that is gone when its run ends; its CPU is sampled
over the same fixed window of steady state (from ``--warmup-s`` after its first committed
output), and its rate and latencies come from the lines whose arrival falls in that window,
read back once a file written after the window's end is visible for every writer. Systems
alternate (the order reversed every other rate), so the drift of a shared machine falls on all.

    python -m bench.cost_curve --rates 10,100,1000,10000,100000 --systems cairn,bytewax,pyflink

``pyflink`` runs once per ``--flink-buffer-timeouts`` (default ``100,1``: Flink's default and
1 ms for reference), as ``pyflink-100ms`` and ``pyflink-1ms``. The jobs: ``bench/cost_job.py``
(Cairn), ``bench/peers/pyflink_cost.py`` and ``bench/peers/bytewax_cost.py`` (their venvs from
``bench/peers/install.sh``). Prints a line per run and a markdown table (medians over
``--repeat``), writes every result to ``<out>/results.json`` (and ``--json``) and the plot to
``--plot`` (default ``bench/out/cost_curve.png``); ``--report results.json`` renders them again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

from run_peer import peer_env, venv_python  # noqa: E402

from bench.cost_measure import (  # noqa: E402
    ROLES,
    TreeSampler,
    cost_figures,
    cpu_by_role,
    markdown_table,
    read_window,
    writer_of,
)

__all__ = ["expand_systems", "main", "run_order"]

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SYSTEMS = ("cairn", "bytewax", "pyflink")
SAMPLE_S = 1.0  # CPU samples inside the window (processes that end still count)
POLL_S = 0.25


def expand_systems(systems: list[str], buffer_timeouts: list[int]) -> list[str]:
    """The runs' labels: ``pyflink`` once per buffer timeout.

    >>> expand_systems(["cairn", "pyflink", "bytewax"], [100, 1])
    ['cairn', 'pyflink-100ms', 'pyflink-1ms', 'bytewax']
    """
    out: list[str] = []
    for system in systems:
        if system not in SYSTEMS:
            raise SystemExit(f"unknown system {system!r} (expected one of {', '.join(SYSTEMS)})")
        out += [f"pyflink-{bt}ms" for bt in buffer_timeouts] if system == "pyflink" else [system]
    return out


def run_order(rates: list[float], labels: list[str], repeat: int) -> list[tuple[int, float, str]]:
    """``(repeat, rate, label)`` in run order: per repeat, each rate with every system, the
    systems' order reversed every other time.

    >>> run_order([10, 100], ["a", "b"], 2)
    [(0, 10, 'a'), (0, 10, 'b'), (0, 100, 'b'), (0, 100, 'a'), (1, 10, 'b'), (1, 10, 'a'), \
(1, 100, 'a'), (1, 100, 'b')]
    """
    order = []
    for rep in range(repeat):
        for i, rate in enumerate(rates):
            systems = labels if (rep + i) % 2 == 0 else labels[::-1]
            order += [(rep, rate, label) for label in systems]
    return order


def command(label: str, rate: float, out: Path, work: Path, ns: argparse.Namespace) -> Any:
    """``(argv, env, cwd)`` of one system's job, or a reason it cannot run."""
    common = [
        "--rate", repr(float(rate)), "--keys", str(ns.keys), "--parallelism", "2",
        "--checkpoint-interval-ms", "1000", "--out", str(out), "--work-dir", str(work),
    ]  # fmt: skip
    if label == "cairn":
        env = dict(os.environ)
        paths = [str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        conf = [a for c in ns.cairn_conf for a in ("--conf", c)]
        return [sys.executable, "-m", "bench.cost_job", *common, *conf], env, ROOT
    venv = label.split("-")[0]
    if not venv_python(venv).exists():
        return f"{venv} is not installed: run bash bench/peers/install.sh {venv}"
    script = PEERS / f"{venv}_cost.py"
    extra = ["--buffer-timeout-ms", label.split("-")[1][:-2]] if venv == "pyflink" else []
    return [str(venv_python(venv)), str(script), *common, *extra], peer_env(venv), work


def first_output(out: Path) -> float | None:
    """When the first committed line showed up (the mtime of the oldest visible non-empty
    file), or ``None``."""
    times = [e.stat().st_mtime for e in _visible(out) if e.stat().st_size > 0]
    return min(times) if times else None


def committed_past(out: Path, start_ns: int, end_ns: int) -> bool:
    """Every writer active in the window has a visible file last written after its end (so its
    lines of the window are all committed)."""
    latest: dict[str, int] = {}
    for entry in _visible(out):
        mtime = entry.stat().st_mtime_ns
        if mtime >= start_ns:
            w = writer_of(entry.name)
            latest[w] = max(latest.get(w, 0), mtime)
    return bool(latest) and min(latest.values()) >= end_ns


def _visible(out: Path) -> list[os.DirEntry[str]]:
    found: list[os.DirEntry[str]] = []
    if not out.is_dir():
        return found
    for entry in os.scandir(out):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            found += _visible(Path(entry.path))
        else:
            found.append(entry)
    return found


def run_one(label: str, rate: float, work: Path, ns: argparse.Namespace) -> dict[str, Any]:
    """One run of one system at one rate (see the module's invariant)."""
    result: dict[str, Any] = {"system": label, "rate": rate, "work_dir": str(work)}
    out = work / "out"
    work.mkdir(parents=True, exist_ok=True)
    cmd = command(label, rate, out, work, ns)
    if isinstance(cmd, str):
        return {**result, "error": cmd, "unsupported": cmd}
    argv, env, cwd = cmd
    log_path = work / "job.log"
    result["log"] = str(log_path)
    launched = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
    sampler = TreeSampler(proc.pid)
    try:
        result.update(_measure(proc, sampler, out, rate, launched, label, ns))
    finally:
        stop_tree(proc, sampler)
    if "error" not in result:
        window = read_window(str(out), result.pop("_t0_ns"), result.pop("_t1_ns"))
        result.update(cost_figures(result.pop("_cpu_s"), result["window_s"], window, rate))
        result["torn_lines"] = window.torn
    if not ns.keep and "error" not in result:
        _remove(work)
        del result["work_dir"], result["log"]
    return result


def _measure(
    proc: subprocess.Popen[bytes],
    sampler: TreeSampler,
    out: Path,
    rate: float,
    launched: float,
    label: str,
    ns: argparse.Namespace,
) -> dict[str, Any]:
    deadline = launched + ns.startup_timeout
    ready = None
    while ready is None:
        if proc.poll() is not None:
            return {"error": f"exited with code {proc.returncode} before any output"}
        if time.time() > deadline:
            return {"error": f"no committed output after {ns.startup_timeout:.0f} s"}
        sampler.sample()
        time.sleep(POLL_S)
        ready = first_output(out)
    start_at = max(time.time(), ready) + ns.warmup_s
    while time.time() < start_at:
        sampler.sample()
        time.sleep(min(POLL_S, max(0.0, start_at - time.time())))
    t0 = time.time_ns()
    start = sampler.start_window()
    end_at = t0 + int(ns.seconds * 1e9)
    while (now := time.time_ns()) < end_at:
        if proc.poll() is not None:
            return {"error": f"exited with code {proc.returncode} during the window"}
        time.sleep(min(SAMPLE_S, (end_at - now) / 1e9))
        sampler.sample()
    t1 = time.time_ns()
    cpu_s = cpu_by_role(start, sampler.seen, proc.pid, label)
    figures: dict[str, Any] = {
        "startup_s": round(ready - launched, 2),
        "window_s": (t1 - t0) / 1e9,
        "_t0_ns": t0,
        "_t1_ns": t1,
        "_cpu_s": cpu_s,
        "processes": len(sampler.seen),
    }
    commit_deadline = time.time() + ns.commit_timeout
    while not committed_past(out, t0, t1):
        if time.time() > commit_deadline or proc.poll() is not None:
            figures["note"] = "not every writer committed past the window: some lines missing"
            break
        time.sleep(POLL_S)
    return figures


def stop_tree(proc: subprocess.Popen[bytes], sampler: TreeSampler) -> None:
    """SIGTERM the job's process group and every process seen in its tree (Spark's Python
    daemon sits in a group of its own), then SIGKILL what is left after 5 s."""
    import psutil

    seen = {p.pid: p.create_time for p in sampler.seen.values()}
    seen[proc.pid] = seen.get(proc.pid, 0.0)

    def alive() -> list[psutil.Process]:
        found = []
        for pid, created in seen.items():
            try:
                p = psutil.Process(pid)
                if (not created or p.create_time() == created) and p.status() != "zombie":
                    found.append(p)
            except psutil.Error:
                continue
        return found

    sampler.sample()  # children started since the last sample
    seen.update({p.pid: p.create_time for p in sampler.seen.values()})
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in alive():
            try:
                p.send_signal(sig)
            except psutil.Error:
                continue
        _, still = psutil.wait_procs(alive(), timeout=grace)
        if not still:
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _line(i: int, n: int, result: dict[str, Any]) -> str:
    head = f"[{i}/{n}] {result['rate']:,.0f}/s {result['system']}"
    if result.get("error"):
        return f"{head}: {result['error']}"
    flag = " SATURATED" if result["saturated"] else ""
    us = result["us_per_record"]
    roles = ", ".join(
        f"{role} {result[f'{role}_cores']:.3f}"
        for role in ROLES
        if result.get(f"{role}_cores") is not None
    )
    return (
        f"{head}: {result['achieved_per_s']:,.0f}/s{flag}, cores {result['cores']:.3f} "
        f"({roles}), {'-' if us is None else f'{us:,.1f}'} µs/record, "
        f"p50 {result['latency_p50_ms']} p99 {result['latency_p99_ms']} "
        f"p99.9 {result['latency_p999_ms']} ms"
    )


def _render(data: dict[str, Any], plot: Path | None) -> None:
    labels = data["params"]["labels"]
    print("\n" + "\n".join(markdown_table(data["results"], labels)))
    if plot is not None:
        from bench.cost_plot import plot_cost

        if plot_cost(data["results"], labels, plot):
            print(f"plot: {plot}")
        else:
            print("plot skipped: matplotlib is not installed (bench/requirements.txt)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost_curve", description=__doc__)
    parser.add_argument("--rates", default="10,100,1000,10000,100000")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--flink-buffer-timeouts", default="100,1", help="ms, one run each")
    parser.add_argument("--seconds", type=float, default=40.0, help="the measuring window")
    parser.add_argument("--warmup-s", type=float, default=5.0, help="after the first output")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--cairn-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--startup-timeout", type=float, default=240.0)
    parser.add_argument("--commit-timeout", type=float, default=30.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--plot", type=Path, default=OUT / "cost_curve.png")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep each run's files and logs")
    parser.add_argument("--report", type=Path, default=None, help="render a results.json again")
    ns = parser.parse_args(argv)
    plot = None if ns.no_plot else ns.plot
    if ns.report is not None:
        _render(json.loads(ns.report.read_text()), plot)
        return 0
    rates = [float(r) for r in ns.rates.split(",") if r.strip()]
    timeouts = [int(t) for t in ns.flink_buffer_timeouts.split(",") if t.strip()]
    labels = expand_systems([s.strip() for s in ns.systems.split(",") if s.strip()], timeouts)
    run_dir = OUT / f"cost-{time.strftime('%Y%m%d-%H%M%S')}"
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ns).items()}
    data: dict[str, Any] = {
        "params": {**params, "rates": rates, "labels": labels},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "results": [],
    }
    order = run_order(rates, labels, ns.repeat)
    for i, (rep, rate, label) in enumerate(order, 1):
        result = run_one(label, rate, run_dir / f"{label}-{rate:g}-r{rep}", ns)
        result["repeat"] = rep
        data["results"].append(result)
        print(_line(i, len(order), result), flush=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "results.json").write_text(json.dumps(data, indent=1))
    if ns.json is not None:
        ns.json.write_text(json.dumps(data, indent=1))
    print(f"results: {run_dir / 'results.json'}")
    _render(data, plot)
    return 0 if all("error" not in r for r in data["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
