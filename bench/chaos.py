"""A fault campaign on a simulated multi-host cluster (``cairn.testing.netns_cluster``):
a paced keyed job writing exactly-once to files on S3 and to PostgreSQL, under a seeded
schedule of host, process, network, disk and storage faults plus Cairn's own fault points.

Invariant: every fault comes from the seed (``bench/chaos_plan.py``), so a failing seed
replays the same schedule; the verdict reads only what the sinks committed (S3 files, the
PostgreSQL table) and the checkpoints on their storage — never the job's own claims.

    python -m bench.chaos --faults 200 --seed 1          # needs root and iproute2
    python -m bench.chaos --faults 200 --seed 1 --parallel   # the four jobs at once
    python -m bench.chaos --faults 12 --seed 3 --runs aligned-hashmap --load 0.5
    python -m bench.chaos --faults 12 --seed 3 --runs aligned-hashmap --rate 300
    python -m bench.chaos --faults 24 --seed 5 --runs aligned-rocksdb --storage hdfs

With ``--storage hdfs`` the checkpoints go to an HDFS on the storage host (a NameNode and two
DataNodes, files replicated twice) and the store's own faults join the schedule: the store
paused past the checkpoint timeout (slow), a DataNode lost, its disk full (besides
``storage-down``, which then kills HDFS too).

Each run (aligned/unaligned x heap/RocksDB incremental) is one long job: each fault healed
after its duration, the next one as soon as a checkpoint completed after the heal (the
recovery time), or right into the restore (``kill-during-restore``). The
job is ended by a stop-with-savepoint; its output must then be exactly the first N records of
the generator for some N (0 lost, 0 duplicated), in per-key order in PostgreSQL, and the
running sums right (per-key order of the state). The last line printed is the JSON summary.

At load (``--load F``, the default at 0.5): before its faults, each run measures its job
kind's maximum on the same cluster (``measure_max``: the same job unthrottled, its own
sinks, 30 s of committed output after a warm-up; with ``--parallel`` the four at once) and
paces its job at F of it; ``--rate R`` paces at a fixed R instead. Per run the report has a
load row: the maximum, the target, and the records/s the file sink committed in steady
windows (no fault in effect or being recovered from; the first ``--steady-s`` before the
faults is one) and over the whole fault phase, recoveries included (``bench/chaos_load.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.chaos_faults import Injector, made_faults
from bench.chaos_gates import RunGates, StartGate
from bench.chaos_load import (
    CommitSampler,
    disturbed_windows,
    held_rate,
    steady_rate,
    target_rate,
)
from bench.chaos_plan import (
    INTERNAL_PHASE,
    RunVerdict,
    internal_faults,
    internal_point,
    plan_external,
    report,
)
from bench.chaos_verify import verify as _verify
from cairn.testing.netns_cluster import NetnsCluster

log = logging.getLogger("bench.chaos")

ROOT = Path(__file__).resolve().parents[1]
# Spark's own liveness at its defaults, not shorter: on a starved machine (load 30-60, the
# campaign niced) a healthy executor's heartbeat came 23.5 s late and Spark workers missed a
# 10 s timeout; Spark then dropped them and every new attempt waited for slots and workers
# that were being replaced. The faults are detected by Cairn's own liveness (the 10 s TCP
# user timeout of its connections, the driver's lease) whatever Spark thinks; a killed
# executor or Spark worker closes its connections, which Spark notices at once; and a
# partition heals within seconds, well under these timeouts.
SPARK_LIVENESS = {
    "spark.network.timeout": "120s",
    "spark.network.timeoutInterval": "5s",
    "spark.executor.heartbeatInterval": "10s",
}
SPARK_WORKER_TIMEOUT_S = 60  # the master's, for the Spark workers (Spark's default)
# Each job takes two executors of two cores (its two workers fit in either one), so that
# concurrent jobs (--parallel) share the worker hosts instead of the first taking all.
ONE_JOBS_SHARE = {
    # Two workers always: counted from the slots Spark offers at submission, a loaded
    # machine's late executors would make it one.
    "cairn.workers": "2",
    "spark.cores.max": "4",
    "spark.executor.cores": "2",
    "spark.executor.memory": "512m",
}
RUNS = {
    "aligned-hashmap": (False, "hashmap"),
    "unaligned-hashmap": (True, "hashmap"),
    "aligned-rocksdb": (False, "rocksdb"),
    "unaligned-rocksdb": (True, "rocksdb"),
}


def _job(
    cluster: NetnsCluster,
    name: str,
    seed: int,
    args: argparse.Namespace,
    *,
    rate: float | None,
    tag: str = "",
    faults: str | None = None,
) -> tuple[dict[str, Any], str | None, Path]:
    """A job of kind ``name`` (its PostgreSQL table created, its work directory with the
    faults file ``faults``, by default the seed's fault points): its spec, its table (None
    without PostgreSQL) and its work directory. ``tag`` names a job apart from the run's own
    (the maximum's); ``rate`` None: unthrottled."""
    unaligned, backend = RUNS[name]
    assert cluster.s3 is not None and cluster.net is not None
    table = f"chaos_{tag}{name.replace('-', '_')}_{seed}"
    jdbc = None
    if cluster.pg is not None:
        with cluster.pg.connect() as conn:
            conn.execute(
                f"CREATE TABLE {table} (id bigserial PRIMARY KEY, k text, seq bigint, total bigint)"
            )
        jdbc = {
            "url": cluster.pg.jdbc_url(),
            "user": cluster.pg.user,
            "password": cluster.pg.password,
            "table": table,
        }
    work = cluster.net.dir / f"run-{tag}{name}-{seed}"
    work.mkdir()
    faults_file = work / "faults"
    if faults is None:
        faults = internal_faults(seed, str(work / "fired"), unaligned=unaligned)
    faults_file.write_text(faults)
    prefix = f"chaos/{tag}{name}-{seed}"
    spec = {
        "name": f"chaos-{tag}{name}-{seed}",
        "out": cluster.s3.url(prefix, "out"),
        "checkpoints": cluster.checkpoint_url(prefix, "chk"),
        "savepoint": cluster.s3.url(prefix, "final-savepoint"),
        "jdbc": jdbc,
        "records": 10**12,
        "keys": args.keys,
        "rate": rate,
        "unaligned": unaligned,
        "backend": backend,
        "interval_ms": args.interval_ms,
        # Unaligned: stalls that leave records in flight at a barrier, for ``replay``.
        "stall": [3.0, 1.0] if unaligned else None,
        "faults_file": str(faults_file),
        "checkpoint_timeout_ms": 20_000,
        "tolerable_failures": 5,
        "conf": {**cluster.job_conf(), **SPARK_LIVENESS, **ONE_JOBS_SHARE},
    }
    (work / "spec.json").write_text(json.dumps(spec))
    return spec, table if jdbc else None, work


def _injector(
    cluster: NetnsCluster,
    name: str,
    seed: int,
    work: Path,
    verdict: RunVerdict,
    driver_host: str,
) -> Injector:
    return Injector(
        cluster,
        argv=[sys.executable, str(ROOT / "bench" / "chaos_job.py"), str(work / "spec.json")],
        checkpoints=json.loads((work / "spec.json").read_text())["checkpoints"],
        faults_file=work / "faults",
        marker=work / "fired",
        unaligned=RUNS[name][0],
        seed=seed,
        verdict=verdict,
        driver_host=driver_host,
    )


def measure_max(
    cluster: NetnsCluster,
    name: str,
    seed: int,
    args: argparse.Namespace,
    driver_host: str = "driver",
    gates: RunGates | None = None,
) -> float:
    """The records/s a job of kind ``name`` commits unthrottled on this cluster: the same
    job (source, keyed state on the same backend, the same checkpointing mode, stalls and
    exactly-once sinks: files on S3 and PostgreSQL), its source without a rate limit and no
    faults, run apart (its own output, table and checkpoints). Once it completed three
    checkpoints (warmed up), the controller counts the lines its file sink committed for
    ``args.measure_s`` seconds (a sample every 2 s): the maximum is the committed records
    over the time between the first and last sample. Then the job is cancelled. Concurrent
    runs (``--parallel``) warm up, measure and end their maximum's jobs together, so each
    maximum is that job's share of the cluster with every job running, as in the faults."""
    gates = gates or RunGates({})
    spec, _, work = _job(cluster, name, seed, args, rate=None, tag="max_", faults="")
    injector = _injector(
        cluster, name, seed, work, RunVerdict(name=f"max-{name}", seed=seed, records=0), driver_host
    )
    sampler = None
    try:
        injector.start_driver()
        injector.await_checkpoints(3, timeout=args.start_timeout, since=0.0)
        gates.meet("warm")
        assert cluster.s3 is not None
        sampler = CommitSampler(cluster.s3.filesystem, spec["out"])
        time.sleep(args.measure_s)
        samples = sampler.samples
        if injector.job_id is not None:
            cli = cluster.start_driver(
                [sys.executable, "-m", "cairn.cli.main", "cancel", injector.job_id],
                name="cancel-max",
                host_name=driver_host,
            )
            with contextlib.suppress(subprocess.TimeoutExpired):
                cli.wait(120)
            _roll_back_prepared(cluster, injector.job_id)
    finally:
        if sampler is not None:
            sampler.close()
        injector.close()
        # The run's own driver logs start afresh (its Injector reads them).
        for path in cluster.host(driver_host).dir.glob("driver-*.log"):
            path.rename(path.with_name(f"max-{path.name}"))
    rate = held_rate(samples, 0.0, float("inf"))
    log.info("run %s: maximum %s records/s over %d samples", name, rate, len(samples))
    if not rate:
        raise RuntimeError(f"no records committed in {args.measure_s:g} s unthrottled")
    return rate


def _roll_back_prepared(cluster: NetnsCluster, job_id: str) -> None:
    """Roll back a cancelled job's prepared JDBC transactions: no restore will end them,
    and they would hold their locks and PostgreSQL's vacuum horizon for the campaign."""
    if cluster.pg is None:
        return
    try:
        with cluster.pg.connect() as conn:
            gids = conn.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s", (f"%:{job_id}:%",)
            ).fetchall()
            for (gid,) in gids:
                conn.execute(f"ROLLBACK PREPARED '{gid}'")
    except Exception:  # not the measurement's concern: the campaign goes on
        log.exception("rolling back the prepared transactions of job %s", job_id)


def run_job(
    cluster: NetnsCluster,
    name: str,
    seed: int,
    faults: int,
    args: argparse.Namespace,
    driver_host: str = "driver",
    gates: RunGates | None = None,
) -> RunVerdict:
    """One job until ``faults`` faults were injected (external ones, and the internal fault
    points, one in every other attempt, that fired) or ``args.minutes`` ran out. With
    ``args.load``, its maximum is measured first (``measure_max``) and the job paced at
    that fraction of it, else at ``args.rate``. A steady ``args.steady_s`` before the first
    fault; the records/s the file sink committed are sampled throughout. With ``gates``
    (concurrent runs), the maximum's phases and the faults begin together."""
    gates = gates or RunGates({})
    verdict = RunVerdict(name=name, seed=seed, records=0)
    began = time.monotonic()
    assert cluster.s3 is not None
    spec: dict[str, Any] | None = None
    table = None
    injector = sampler = None
    faults_began = faults_ended = None
    try:
        rate = args.rate
        if args.load is not None:
            verdict.max_rate = measure_max(cluster, name, seed, args, driver_host, gates)
            rate = target_rate(verdict.max_rate, args.load)
            gates.meet("measured")
            time.sleep(gates.delay_s)  # the Spark sessions start one after the other
        verdict.target_rate = rate
        spec, table, work = _job(cluster, name, seed, args, rate=rate)
        injector = _injector(cluster, name, seed, work, verdict, driver_host)
        injector.start_driver()
        injector.await_checkpoints(2, timeout=args.start_timeout, since=0.0)
        sampler = CommitSampler(cluster.s3.filesystem, spec["out"])
        gates.meet("started")
        time.sleep(args.steady_s)  # a steady window before the faults
        faults_began = time.monotonic()
        # ``faults`` counts both kinds: the external ones and the fault points that fired.
        plan = plan_external(seed, 10 * faults, workers=cluster.workers, storage=cluster.storage)
        for fault in plan:
            if sum(verdict.external.values()) + len(injector.fired_lines()) >= faults:
                break
            if time.monotonic() >= args.end_at:
                verdict.notes.append(f"ended for time (--minutes {args.minutes:g})")
                break
            time.sleep(fault.gap_s)
            injector.inject(fault)
        faults_ended = time.monotonic()
        injector.stop_job(spec["savepoint"])
        verdict.finished = True  # stopped with a savepoint: FINISHED, every sink committed
    except Exception as exc:  # a verdict with the reason, not a campaign that stops
        log.exception("run %s (seed %d) broke", name, seed)
        verdict.notes.append(f"campaign error: {type(exc).__name__}: {exc}")
    finally:
        gates.leave()
        if sampler is not None:
            sampler.close()
        if injector is not None:
            injector.close()
    if injector is not None and spec is not None:
        for line in injector.fired_lines():
            point = internal_point(line)
            verdict.internal[(f"point {point}", INTERNAL_PHASE.get(point, point))] += 1
        verdict.checkpoints = injector.max_checkpoint
        if sampler is not None:
            _held(verdict, sampler.samples, injector, faults_began, faults_ended, args)
        _verify_when_up(cluster, spec, table, verdict, injector.job_id)
    if not verdict.ok:
        _keep_logs(cluster, driver_host, f"{name}-{seed}", verdict)
    verdict.wall_s = time.monotonic() - began
    return verdict


def _verify_when_up(
    cluster: NetnsCluster,
    spec: dict[str, Any],
    table: str | None,
    verdict: RunVerdict,
    job_id: str | None,
    attempts: int = 12,
) -> None:
    """``_verify``, again every 10 s while the storage is unreachable: a concurrent run's
    ``storage-down`` (PostgreSQL and S3 restarted) may be in effect when this run ends. A
    run whose output could not be read at all has no verdict (``verified`` False)."""
    for attempt in range(attempts):
        try:
            _verify(cluster, spec, table, verdict, job_id=job_id)
            return
        except Exception as exc:
            log.warning("run %s: its output unreadable (%s), again in 10 s", verdict.name, exc)
            if attempt == attempts - 1:
                verdict.verified = False
                verdict.notes.append(f"no verdict: the output unreadable: {exc}")
                return
            time.sleep(10)


def _held(
    verdict: RunVerdict,
    samples: list[tuple[float, int]],
    injector: Injector,
    faults_began: float | None,
    faults_ended: float | None,
    args: argparse.Namespace,
) -> None:
    """The records/s the run's file sink committed: over the fault phase (faults and their
    recoveries included) and in its steady windows (no fault of any run in effect, and a
    checkpoint completed and committed since the last heal)."""
    end = faults_ended if faults_ended is not None else float("inf")
    if faults_began is not None:
        verdict.held_rate = held_rate(samples, faults_began, end)
    if not samples:
        return
    # Faults healed before the run's sampling began (an earlier run's) are not its own.
    faults = [(made, healed) for made, healed in made_faults() if healed >= samples[0][0]]
    completions = [t for t, _ in injector.completions]
    disturbed = disturbed_windows(faults, completions, settle_s=args.interval_ms / 1000 + 1)
    verdict.steady_rate, verdict.steady_s = steady_rate(samples, disturbed, 0.0, end)


def _keep_logs(cluster: NetnsCluster, driver_host: str, run: str, verdict: RunVerdict) -> None:
    """Copy a failed run's driver logs (one per driver run) out of its host, which the
    cluster deletes on the way out: the cause of a failure is in them."""
    keep = Path(tempfile.mkdtemp(prefix=f"cairn-chaos-{run}-"))
    for log_file in sorted(cluster.host(driver_host).dir.glob("*.log")):
        shutil.copy(log_file, keep / log_file.name)
    verdict.notes.append(f"the driver logs are kept in {keep}")


def _logged(verdict: RunVerdict) -> dict[str, Any]:
    """The verdict's fields, its counters as they are (``asdict`` would make each a
    Counter of ``(key, count)`` pairs)."""
    fields = {f.name: getattr(verdict, f.name) for f in dataclasses.fields(verdict)}
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in fields.items()}


def _run_parallel(
    cluster: NetnsCluster,
    names: list[str],
    seeds: list[int],
    per_run: list[int],
    args: argparse.Namespace,
) -> list[RunVerdict]:
    """Every run at once, each on its own driver host; the verdicts in ``names`` order."""
    verdicts: dict[str, RunVerdict] = {}
    shared = {gate: StartGate(len(names)) for gate in ("warm", "measured", "started")}

    def one(index: int) -> None:
        name = names[index]
        gates = RunGates(shared, delay_s=index * args.stagger)
        try:
            driver_host = cluster.driver_hosts[index]
            verdicts[name] = run_job(
                cluster, name, seeds[index], per_run[index], args, driver_host, gates
            )
        except Exception as exc:  # a run without a verdict is reported, not dropped
            log.exception("run %s broke", name)
            verdicts[name] = RunVerdict(name=name, seed=seeds[index], records=0, verified=False)
            verdicts[name].notes.append(f"campaign error: {type(exc).__name__}: {exc}")
        log.info("run %s: %s", name, _logged(verdicts[name]))

    threads = [
        threading.Thread(target=one, args=(i,), name=f"run-{names[i]}", daemon=True)
        for i in range(len(names))
    ]
    for thread in threads:
        thread.start()
        time.sleep(args.stagger)  # the Spark sessions start one after the other
    for thread in threads:
        thread.join()
    return [verdicts[name] for name in names if name in verdicts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument(
        "--faults", type=int, default=200, help="faults in all (external + fault points fired)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--runs", default=",".join(RUNS), help="comma-separated of " + str(list(RUNS))
    )
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument(
        "--load",
        type=float,
        nargs="?",
        const=0.5,
        help="pace each job at this fraction of its maximum, measured first on the cluster "
        "(the default, at 0.5)",
    )
    pace.add_argument("--rate", type=float, help="pace each job at a fixed records/s instead")
    parser.add_argument(
        "--measure-s", type=float, default=30.0, help="s the maximum is measured over"
    )
    parser.add_argument(
        "--steady-s", type=float, default=20.0, help="s of steady running before the faults"
    )
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--start-timeout", type=float, default=900.0)
    parser.add_argument(
        "--stagger", type=float, default=30.0, help="s between the runs' starts (--parallel)"
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=0.0,
        help="stop making faults after this long (0: no limit); the runs still end with a "
        "savepoint and their verdict",
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--storage",
        choices=["s3", "hdfs"],
        default="s3",
        help="the checkpoints' storage: S3 (SeaweedFS) or HDFS (with its own faults)",
    )
    parser.add_argument(
        "--out", help="write the Markdown report to this file too (in a directory: report.md)"
    )
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the jobs at once (a driver host each; faults take turns, recoveries overlap)",
    )
    args = parser.parse_args(argv)
    if args.rate is None and args.load is None:
        args.load = 0.5
    if args.load is not None:
        try:  # refused before the hosts start
            target_rate(1.0, args.load)
        except ValueError as exc:
            parser.error(str(exc))
    if args.out and os.path.isdir(args.out):  # refused or named before the hours of a run
        args.out = os.path.join(args.out, "report.md")
    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        parser.error(f"--out: no directory for {args.out}")
    args.end_at = time.monotonic() + args.minutes * 60 if args.minutes else float("inf")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # SIGTERM unwinds like Ctrl-C: the hosts are stopped and deleted on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [n for n in args.runs.split(",") if n]
    per_run = [
        args.faults // len(names) + (i < args.faults % len(names)) for i in range(len(names))
    ]
    command = "python -m bench.chaos " + " ".join(sys.argv[1:] if argv is None else argv)
    seeds = [args.seed * 1000 + list(RUNS).index(name) for name in names]  # replayable alone
    # Per worker host, two cores per job and two spare: a new attempt fits on one host
    # while the other's executor or Spark worker is being replaced.
    jobs = len(names) if args.parallel else 1
    with NetnsCluster(
        workers=2,
        cores_per_worker=2 * jobs + 2,
        worker_memory=f"{jobs + 1}g",
        postgres=not args.no_postgres,
        drivers=jobs,
        worker_timeout_s=SPARK_WORKER_TIMEOUT_S,
        storage=args.storage,
    ) as cluster:
        if args.parallel:
            verdicts = _run_parallel(cluster, names, seeds, per_run, args)
        else:
            verdicts = []
            for name, seed, count in zip(names, seeds, per_run, strict=True):
                verdicts.append(run_job(cluster, name, seed, count, args))
                log.info("run %s: %s", name, _logged(verdicts[-1]))
                if args.out:  # after every run: a campaign cut short keeps what it found
                    Path(args.out).write_text(report(verdicts, command) + "\n")
    if args.out:
        Path(args.out).write_text(report(verdicts, command) + "\n")
    text = report(verdicts, command)
    print(text)
    summary = {
        "faults": sum(v.faults for v in verdicts),
        "ok": all(v.ok for v in verdicts),
        "runs": [
            {
                "name": v.name,
                "seed": v.seed,
                "faults": v.faults,
                "ok": v.ok,
                "records": v.records,
                "max_rate": v.max_rate,
                "target_rate": v.target_rate,
                "held_rate": v.held_rate,
                "steady_rate": v.steady_rate,
                "steady_s": v.steady_s,
            }
            for v in verdicts
        ],
    }
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
