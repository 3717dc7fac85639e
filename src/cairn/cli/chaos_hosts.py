"""``cairn chaos job.py --profile hosts``: the faulted run on simulated hosts
(:class:`~cairn.testing.netns_cluster.NetnsCluster`: a Spark master, two worker hosts, a
storage host with S3, a driver host), under host faults as well as the local profile's
worker kills; the reference run stays local.

Invariant: the faulted run is the job's script run by ``chaos_run.run_job`` in a driver process
on the driver host (``python -m cairn.cli.chaos_hosts_driver spec.json``), with the same
redirection of its sinks as a local run, into the run's directory, which every host sees
(one machine); its checkpoints go to the cluster's S3. The host faults are drawn from the
seed (``plan_host_faults``), each made once the job completed a checkpoint since the last
one was healed (``cairn.testing.host_faults``), and each one's outcome (landed when and
what the driver's log showed meanwhile, or missed why) is reported. With
``--driver-kills K`` the driver host itself is lost K times and the run goes on in new
drivers there that resume it (``chaos_hosts_lives``), never while a host fault lasts; with
``--rescale`` the run is in ``run_job``'s segments, its savepoints in the run's directory. The
cluster is this run's own (a /24 of its own) and is deleted on the way out. The decisions
are pure functions in ``chaos_hosts_plan``; the processes, hosts and files are here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from cairn.cli.chaos_driver import KillOutcome
from cairn.cli.chaos_hosts_lives import DriverLives
from cairn.cli.chaos_hosts_plan import (
    HostDriverKill,
    HostFault,
    HostOutcome,
    host_lines,
    job_events,
    parse_progress,
    plan_host_driver_kills,
    plan_host_faults,
    refusal,
    replay_with_profile,
    split_faults,
    unavailable_text,
    unreachable_sinks,
)
from cairn.cli.chaos_verdict import Record

__all__ = ["HostsDown", "cmd_chaos_hosts"]

# The cluster's Spark: a lost executor noticed within seconds, two workers of two cores.
_SPARK = {
    "spark.network.timeout": "20s",
    "spark.network.timeoutInterval": "5s",
    "spark.executor.heartbeatInterval": "2s",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "2",
    "spark.cores.max": "4",
    "cairn.workers": "2",
}


# -- the runs (I/O) ------------------------------------------------------------------------


def _unavailable() -> str | None:
    """Why simulated hosts cannot be made here (None: they can)."""
    if not sys.platform.startswith("linux"):
        return "simulated hosts need Linux (network namespaces)"
    from cairn.testing.hosts import netns_unavailable

    return netns_unavailable()


class HostsDown(Exception):
    """The simulated hosts could not be started (a server of theirs did not come up)."""


class _ClusterStart(threading.Thread):
    """Starts this run's own cluster in the background, while the reference runs here
    (the reference is mostly the job's pacing; the cluster's start, tens of seconds)."""

    def __init__(self) -> None:
        super().__init__(name="cairn-chaos-hosts", daemon=True)
        self.cluster: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from cairn.testing.netns_cluster import NetnsCluster

        try:  # a failed start stops what it started
            self.cluster = NetnsCluster(workers=2, cores_per_worker=2, postgres=False).start()
        except Exception as error:
            self.error = error

    def result(self) -> Any:
        """The started cluster; ``HostsDown`` with the first line of why not."""
        self.join()
        if self.cluster is None:
            error = self.error or RuntimeError("no cluster")
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise HostsDown(f"the simulated hosts did not start: {first}") from error
        return self.cluster

    def stop(self) -> None:
        """Stop the cluster, once started (deleting its hosts), whatever became of the run."""
        self.join()
        if self.cluster is not None:
            self.cluster.stop()


def cmd_chaos_hosts(args: argparse.Namespace) -> int:
    """``cairn chaos`` with ``--profile hosts``: the reference run here, the faulted one on
    simulated hosts; the verdict and report as the local profile's, plus the host faults."""
    from cairn.cli.chaos_driver import driver_kill_lines
    from cairn.cli.chaos_inputs import InputCapture
    from cairn.cli.chaos_report import replay_command, report, rescale_text
    from cairn.cli.chaos_run import (
        INTERVAL_MS,
        judge,
        run_job,
        say,
        segments_of,
    )
    from cairn.testing.fault_plan import Vertex, fired_faults, plan_faults

    reason = refusal(args)
    if reason is None:
        unavailable = _unavailable()
        reason = unavailable_text(unavailable) if unavailable is not None else None
    if reason is not None:
        say(reason)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cairn-chaos-", dir=args.work_dir)
    args.inputs = InputCapture.from_args(args, work)
    starting = _ClusterStart()
    starting.start()
    try:
        say(f"--seed={seed}, work directory {work}; the reference run (no faults, local)")
        reference = run_job(args, "reference", work)
        if reference.error is not None:
            say(f"the job fails without faults ({reference.error}); nothing to compare")
            return 2
        sinks = [(s.name, s.kind, s.redirection is not None) for s in reference.sinks]
        reason = unreachable_sinks(sinks)
        if reason is not None:
            say(reason)
            return 2
        records = sum(len(r) for r in reference.outputs.values())
        kills, hosts = split_faults(args.faults)
        segments = segments_of(reference.parallelism, args.rescale)
        # --rescale: segment k stops after its share of the reference's checkpoints
        stop_after = max(1, reference.checkpoints // (len(segments) + 1))
        plan = plan_faults(
            seed,
            kills,
            vertices=reference.vertices or (Vertex("", reference.parallelism),),
            records_per_subtask=max(10, records // reference.parallelism),
            segments=len(segments),
        )
        host_plan = plan_host_faults(seed, hosts)
        kills_plan = plan_host_driver_kills(
            seed,
            args.driver_kills,
            checkpoints=reference.checkpoints,
            vertices=reference.vertices or (Vertex("", reference.parallelism),),
            interval_s=(args.checkpoint_interval or INTERVAL_MS) / 1000,
        )
        markers = os.path.join(work, "fault-markers")
        os.makedirs(markers)
        try:
            cluster = starting.result()
        except HostsDown as error:
            say(f"--profile hosts: {error}")
            return 2
        driver_kills = f" and {len(kills_plan)} driver kills" if kills_plan else ""
        say(
            f"the run on simulated hosts under {len(host_plan)} host faults, {len(plan)} "
            f"worker kills{driver_kills} ({reference.seconds:.1f} s without, locally)"
        )
        chaos, outcomes, started, kill_outcomes = _hosts_run(
            args,
            cluster,
            work,
            plan,
            markers,
            host_plan,
            reference,
            kills_plan,
            segments=(segments, stop_after),
        )
    finally:
        starting.stop()
    fired = fired_faults(plan, markers)
    command = replay_with_profile(replay_command(args, seed))
    if chaos.error is not None:
        print(f"FAILED under faults: {chaos.error}")
        for f in fired:
            print(f"  fired {f.fault.describe()}: {f.where}")
        print("\n".join(host_lines(outcomes, started)))
        if kills_plan:
            print("\n".join(driver_kill_lines(kill_outcomes, len(kills_plan))))
        print(f"  the driver's log: {os.path.join(work, 'driver.log')}")
        print(f"  replay: {command}")
        return 1
    diffs, cause = judge(
        args,
        work,
        reference,
        chaos,
        again=(lambda: run_job(args, "rescale", work, segments=segments, stop_after=stop_after))
        if args.rescale
        else None,
        where=", local",
    )
    text = report(
        command=command,
        seed=seed,
        plan=plan,
        fired=fired,
        diffs=diffs,
        cause=cause,
        sinks=reference.sinks,
        compared=len(reference.outputs),
        records=records,
        rescale=rescale_text(chaos) if args.rescale else None,
        restores=chaos.restores,
    )
    lines = host_lines(outcomes, started, diffs[0] if diffs else None)
    if kills_plan:
        lines += driver_kill_lines(kill_outcomes, len(kills_plan), diffs)
    print("\n".join([text, *lines]))
    return 1 if diffs else 0


def _hosts_run(
    args: argparse.Namespace,
    cluster: Any,
    work: str,
    plan: Sequence[Any],
    markers: str,
    host_plan: Sequence[HostFault],
    reference: Any,
    kills: Sequence[HostDriverKill] = (),
    segments: tuple[Sequence[int | None], int] = ((None,), 1),
) -> tuple[Any, list[HostOutcome], float, list[KillOutcome]]:
    """The faulted run on ``cluster`` (this run's own, started): the driver on its host,
    the host faults made in turn while it runs, each of ``kills`` in its own driver life
    (``chaos_hosts_lives``), in ``segments`` (the parallelism of each and the checkpoints
    after which each but the last stops with a savepoint: ``run_job``'s); (its
    ``RunResult``, each host fault's outcome, when the driver started, each driver kill's
    outcome)."""
    from cairn.cli.chaos_outputs import appended_records, snapshot
    from cairn.cli.chaos_run import say
    from cairn.testing.host_faults import aim, make_and_heal

    watched = {path: snapshot(path) for path in args.compare}
    progress = os.path.join(work, "hosts-progress")
    result_path = os.path.join(work, "hosts-result.json")
    outcomes: list[HostOutcome] = []
    kill_outcomes: list[KillOutcome] = []
    started = time.time()
    try:
        conf = {
            **cluster.job_conf(),
            **_SPARK,
            "execution.checkpointing.dir": cluster.checkpoint_url("chaos", "checkpoints"),
            # A restart during a storage outage fails at once: backing off, the attempts
            # outlast it (each host fault may cost a few, each kill one).
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.initial-backoff": "200 ms",
            "restart-strategy.exponential-delay.max-backoff": "4 s",
            "restart-strategy.exponential-delay.backoff-multiplier": "2",
            "restart-strategy.exponential-delay.attempts-before-reset-backoff": str(
                len(plan) + 8 * len(host_plan) + 3
            ),
        }
        # the options as parsed (the captured inputs stay here: the hosts reach no Kafka)
        own = {k: v for k, v in vars(args).items() if not callable(v) and k != "inputs"}
        spec = {
            "args": {
                **own,
                "script": os.path.abspath(args.script),
                "compare": [],
                "executor": "spark",
                "parallelism": args.parallelism or reference.parallelism,
                "conf": [*(args.conf or []), *(f"{k}={v}" for k, v in conf.items())],
            },
            "work": work,
            "plan": [],  # each life's (the worker kills: the last one's)
            "markers": markers,
            "segments": list(segments[0]),
            "stop_after": segments[1],
            "cwd": os.getcwd(),
            "progress": progress,
            "result": result_path,
        }
        # and each life's Spark session's start
        deadline = time.monotonic() + args.minutes * 60 + 120 * (1 + len(kills))
        planned = [dataclasses.asdict(f) for f in plan]
        driver = DriverLives(cluster, spec, work, kills, planned, deadline)
        driver.start()
        started = driver.started
        healed_at = 0
        for fault in host_plan:
            if not _await_checkpoint(progress, healed_at, driver, deadline):
                why = "the job had ended" if driver.poll() is not None else "no checkpoint"
                outcomes.append(HostOutcome(fault, fault.target, missed=why))
                continue
            time.sleep(fault.gap_s)
            running = _job_workers(cluster, driver, min(deadline, time.monotonic() + 60))
            target = aim(fault.kind, fault.target, running)
            if driver.poll() is not None:
                outcomes.append(HostOutcome(fault, target, missed="the job had ended"))
                continue
            if fault.kind != "storage-down" and not running[target]:
                outcomes.append(HostOutcome(fault, target, missed="no worker of the job ran"))
                continue
            say(f"host fault {fault.describe(target)}")
            made = time.time()
            try:
                make_and_heal(cluster, fault.kind, target, fault.duration_s)
            except LookupError as missed:  # its worker ended meanwhile
                outcomes.append(HostOutcome(fault, target, missed=str(missed)))
                continue
            outcomes.append(HostOutcome(fault, target, made, time.time()))
            healed_at = _read_progress(progress)
        driver.finish()
        with contextlib.suppress(Exception):
            driver.wait(max(1.0, deadline - time.monotonic()))
        if driver.poll() is None:
            cluster.kill_host("driver")
            driver.wait(30)
        result = _read_result(result_path, driver.returncode, cluster.log_tail("driver", "driver"))
        kill_outcomes = driver.with_resumes()
        log_text = (cluster.host("driver").dir / "driver.log").read_text(errors="replace")
        outcomes = [
            dataclasses.replace(o, meanwhile=job_events(log_text, o.made_at, o.healed_at + 2.0))
            if o.made_at is not None and o.healed_at is not None
            else o
            for o in outcomes
        ]
    finally:
        with contextlib.suppress(OSError):  # the hosts' directories go with the cluster
            shutil.copy(cluster.host("driver").dir / "driver.log", os.path.join(work, "driver.log"))
    for path in args.compare:
        result.outputs[f"--compare {path}"] = appended_records(path, watched[path])
    return result, outcomes, started, kill_outcomes


def _job_workers(cluster: Any, driver: Any, deadline: float) -> list[bool]:
    """Which worker hosts run a worker of the job, once one does (between two attempts
    none does), while the driver runs and before ``deadline``."""
    while True:
        running = [bool(cluster.job_worker_pids(f"worker-{i}")) for i in range(cluster.workers)]
        if any(running) or driver.poll() is not None or time.monotonic() >= deadline:
            return running
        time.sleep(0.2)


def _read_progress(path: str) -> int:
    try:
        with open(path, encoding="ascii") as f:
            return parse_progress(f.read())[0]
    except OSError:
        return 0


def _await_checkpoint(path: str, since: int, driver: DriverLives, deadline: float) -> bool:
    """Whether the job completed a checkpoint after the ``since``-th one (and after the
    last driver kill: the new driver's) while its driver runs, before ``deadline``;
    meanwhile the driver kill due, if any, is made."""
    while time.monotonic() < deadline and driver.poll() is None:
        driver.kill_if_due()
        if driver.poll() is None and _read_progress(path) > max(since, driver.floor):
            return True
        time.sleep(0.1)
    return False


def _read_result(path: str, returncode: int | None, log_tail: str) -> Any:
    from cairn.cli.chaos_outputs import SinkOutput
    from cairn.cli.chaos_run import RunResult

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        last = [line for line in log_tail.splitlines() if line.strip()][-1:] or [""]
        return RunResult(
            "faults", error=f"the driver on the simulated hosts exited {returncode}: {last[0]}"
        )
    result = RunResult(
        "faults",
        outputs={n: [Record(*r) for r in rs] for n, rs in data["outputs"].items()},
        sinks=[SinkOutput(*s) for s in data["sinks"]],
        parallelism=data["parallelism"],
        checkpoints=data["checkpoints"],
        error=data["error"],
        seconds=data["seconds"],
        segments_run=data["segments_run"],
        restores=[(at, what) for at, what in data["restores"]],
        note=data["note"],
    )
    return result
