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
what the driver's log showed meanwhile, or missed why) is reported; the cluster is this
run's own (a /24 of its own) and is deleted on the way out. The decisions above the
"the runs (I/O)" line are pure functions; the processes, hosts and files are below it.

    >>> plan_host_faults(7, 3) == plan_host_faults(7, 3)
    True
    >>> split_faults(5)
    (2, 3)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import random
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.cli.chaos_verdict import Difference, Record

__all__ = [
    "HOST_KINDS",
    "HostFault",
    "HostOutcome",
    "cmd_chaos_hosts",
    "host_fault_before",
    "host_lines",
    "plan_host_faults",
    "refusal",
    "split_faults",
    "unavailable_text",
    "unreachable_sinks",
]

# The host faults of bench's campaign (bench/chaos_plan.py) that make sense for a user's
# job, with their weights and what a person reads.
HOST_KINDS: dict[str, tuple[int, str]] = {
    "kill-host": (2, "worker host lost"),
    "partition-driver": (1, "partition between a worker host and the driver host"),
    "partition-storage": (1, "partition between a worker host and the storage host"),
    "partition-peer": (1, "partition between the two worker hosts"),
    "disk-full": (2, "disk full on a worker host"),
    "storage-down": (2, "storage outage (the S3 server down)"),
}
_DURATION_S = (2.0, 5.0)
# Sinks whose place is a local directory, which the simulated hosts see; a JDBC or Kafka
# server of this machine is out of their reach (they route only to each other).
_REACHABLE = frozenset({"FileSink"})
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


@dataclass(frozen=True)
class HostFault:
    """Host fault ``#h<index>`` of ``kind`` aimed at worker host ``target``, lasting
    ``duration_s``, made ``gap_s`` after the job checkpointed since the last one healed."""

    index: int
    kind: str
    target: int
    duration_s: float
    gap_s: float = 0.0

    def describe(self, target: int | None = None) -> str:
        """``#h0 worker host lost: worker-1 for 3.2 s`` (``target``: where it was aimed in
        the end).

        >>> HostFault(0, "storage-down", 1, 3.2).describe()
        '#h0 storage outage (the S3 server down) for 3.2 s'
        >>> HostFault(1, "partition-driver", 1, 2.0).describe(0)
        '#h1 partition between a worker host and the driver host: worker-0 for 2.0 s'
        """
        where = (
            ""
            if self.kind == "storage-down"
            else f": worker-{self.target if target is None else target}"
        )
        return f"#h{self.index} {HOST_KINDS[self.kind][1]}{where} for {self.duration_s:.1f} s"


@dataclass(frozen=True)
class HostOutcome:
    """What became of a host fault: made at ``made_at`` (wall time) on worker host
    ``target`` and healed at ``healed_at``, or ``missed`` (why it was not made)."""

    fault: HostFault
    target: int
    made_at: float | None = None
    healed_at: float | None = None
    missed: str | None = None
    meanwhile: str = ""  # what the driver's log shows while it lasted (``job_events``)

    @property
    def landed(self) -> bool:
        return self.missed is None and self.made_at is not None


def split_faults(count: int) -> tuple[int, int]:
    """``--faults N`` under ``--profile hosts``: (worker kills, host faults), the host
    faults the larger half.

    >>> split_faults(0), split_faults(1), split_faults(4)
    ((0, 0), (0, 1), (2, 2))
    """
    hosts = (count + 1) // 2
    return count - hosts, hosts


def plan_host_faults(seed: int, count: int, workers: int = 2) -> tuple[HostFault, ...]:
    """``count`` host faults drawn by weight from ``seed`` (a stream apart from the worker
    kills'), each at a worker host below ``workers``.

    >>> [f.kind for f in plan_host_faults(1, 200)].count("kill-host") > 0
    True
    >>> {f.target for f in plan_host_faults(1, 50)} == {0, 1}
    True
    """
    rng = random.Random(seed * 7919 + 17)
    kinds = list(HOST_KINDS)
    weights = [HOST_KINDS[k][0] for k in kinds]
    return tuple(
        HostFault(
            index,
            rng.choices(kinds, weights)[0],
            rng.randrange(workers),
            round(rng.uniform(*_DURATION_S), 1),
            round(rng.uniform(0.0, 1.0), 1),
        )
        for index in range(count)
    )


def unavailable_text(reason: str) -> str:
    """The one line ``--profile hosts`` prints when simulated hosts cannot be made here:
    the cause and the remedy.

    >>> print(unavailable_text("simulated hosts need root"))
    --profile hosts: simulated hosts need root; run it as root on Linux with iproute2, or use
    --profile local
    """
    return (
        f"--profile hosts: {reason}; run it as root on Linux with iproute2, or use --profile local"
    )


def refusal(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot run under ``--profile hosts`` (None: they can).

    >>> refusal(argparse.Namespace(rescale=True, upgrade=None, executor=None))
    '--profile hosts does not combine with --rescale yet; use --profile local for it'
    >>> refusal(argparse.Namespace(rescale=False, upgrade=None, executor=None)) is None
    True
    """
    for option, given in (
        ("--rescale", getattr(args, "rescale", False)),
        ("--upgrade", getattr(args, "upgrade", None)),
        ("--executor inprocess", getattr(args, "executor", None) == "inprocess"),
    ):
        if given:
            return f"--profile hosts does not combine with {option} yet; use --profile local for it"
    return None


def unreachable_sinks(sinks: Sequence[tuple[str, str, bool]]) -> str | None:
    """Why the job's sinks (name, kind, redirected) cannot be compared on the simulated
    hosts: a redirected sink that commits to a server of this machine (None: all can).

    >>> unreachable_sinks([("Sink 'out'", "FileSink", True), ("print", "x", False)]) is None
    True
    >>> print(unreachable_sinks([("Sink 'rows'", "JdbcSink", True)]))
    --profile hosts compares FileSink outputs only: Sink 'rows' is a JdbcSink, whose server
    the simulated hosts cannot reach; use --profile local
    """
    for name, kind, redirected in sinks:
        if redirected and kind not in _REACHABLE:
            return (
                f"--profile hosts compares FileSink outputs only: {name} is a {kind}, whose "
                "server the simulated hosts cannot reach; use --profile local"
            )
    return None


def host_fault_before(diff: Difference, outcomes: Sequence[HostOutcome]) -> HostOutcome | None:
    """The last host fault that landed before ``diff``'s record was committed (a missing
    record: the last one that landed).

    >>> o = [HostOutcome(HostFault(i, "disk-full", 0, 2.0), 0, float(i), i + 1.0) for i in range(3)]
    >>> host_fault_before(Difference("o", "extra", None, Record("a", 1.5, "p:1")), o).fault.index
    1
    """
    landed = [o for o in outcomes if o.landed]
    if diff.actual is None:
        return landed[-1] if landed else None
    before = [o for o in landed if o.made_at is not None and o.made_at <= diff.actual.committed_at]
    return before[-1] if before else None


def host_lines(
    outcomes: Sequence[HostOutcome], started: float, diff: Difference | None = None
) -> list[str]:
    """The report's lines on the host faults: how many landed, each one's outcome (when,
    seconds into the faulted run, or why missed), and the one just before ``diff``.

    >>> f = HostFault(0, "kill-host", 1, 3.0)
    >>> o = [HostOutcome(f, 1, 112.25, 115.5), HostOutcome(f, 0, missed="the job had ended")]
    >>> for line in host_lines(o, 100.0):
    ...     print(line)
      host faults: 1 of 2 landed
      host fault #h0 worker host lost: worker-1 for 3.0 s: landed at +12.2 s, healed at +15.5 s
      host fault #h0 worker host lost: worker-0 for 3.0 s: missed (the job had ended)
    """
    lines = [f"  host faults: {sum(o.landed for o in outcomes)} of {len(outcomes)} landed"]
    if diff is not None:
        before = host_fault_before(diff, outcomes)
        if before is not None:
            lines.append(f"  host fault just before: {before.fault.describe(before.target)}")
    for o in outcomes:
        what = o.fault.describe(o.target)
        if o.landed and o.made_at is not None and o.healed_at is not None:
            lines.append(
                f"  host fault {what}: landed at +{o.made_at - started:.1f} s, "
                f"healed at +{o.healed_at - started:.1f} s"
                + (f"; meanwhile {o.meanwhile}" if o.meanwhile else "")
            )
        else:
            lines.append(f"  host fault {what}: missed ({o.missed})")
    return lines


_EVENTS = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(?:(Completed checkpoint)|(Aborting checkpoint)"
    r"|attempt \d+ (failed) \(|restored checkpoint \d+ in (\d+) ms)",
    re.MULTILINE,
)


def job_events(log_text: str, start: float, end: float) -> str:
    """What the driver's log (Python logging's ``asctime`` lines, local time) shows
    between ``start`` and ``end`` (wall times): failed attempts, restores and how long
    they took, aborted and completed checkpoints (or that none completed).

    >>> import datetime
    >>> log = chr(10).join([
    ...     "2026-12-06 02:29:23,186 job_master job j: attempt 0 failed (lost ...)",
    ...     "2026-12-06 02:29:32,549 restore_choice job j, attempt 1: restored checkpoint 1 in"
    ...     " 9363 ms: ...",
    ...     "2026-12-06 02:29:32,667 coordinator Completed checkpoint 3 (1655 bytes, 69 ms)",
    ...     "2026-12-06 02:29:50,000 coordinator Completed checkpoint 9 (1655 bytes, 69 ms)",
    ... ])
    >>> t = datetime.datetime(2026, 12, 6, 2, 29, 23).timestamp()
    >>> job_events(log, t, t + 10)
    '1 attempt failed, a restore took 9.4 s, 1 checkpoint completed'
    >>> job_events(log, t + 30, t + 40)
    'no checkpoint completed'
    """
    failed = aborted = completed = 0
    restores: list[float] = []
    for m in _EVENTS.finditer(log_text):
        at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if not start <= at <= end:
            continue
        completed += bool(m.group(2))
        aborted += bool(m.group(3))
        failed += bool(m.group(4))
        if m.group(5):
            restores.append(int(m.group(5)) / 1000)
    parts = []
    if failed:
        parts.append(f"{failed} attempt{'s' * (failed > 1)} failed")
    if restores:
        took = ", ".join(f"{r:.1f} s" for r in restores)
        parts.append(f"a restore took {took}" if len(restores) == 1 else f"restores took {took}")
    if aborted:
        parts.append(f"{aborted} checkpoint{'s' * (aborted > 1)} aborted")
    if completed:
        parts.append(f"{completed} checkpoint{'s' * (completed > 1)} completed")
    else:
        parts.append("no checkpoint completed")
    return ", ".join(parts)


def replay_with_profile(command: str) -> str:
    """The replay command with ``--profile=hosts`` after its seed.

    >>> replay_with_profile("cairn chaos job.py --faults=3 --seed=7 -- --out x")
    'cairn chaos job.py --faults=3 --seed=7 --profile=hosts -- --out x'
    """
    parts = shlex.split(command)
    return shlex.join([*parts[:5], "--profile=hosts", *parts[5:]])


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
    from cairn.cli.chaos_inputs import InputCapture
    from cairn.cli.chaos_report import replay_command, report
    from cairn.cli.chaos_run import (
        control_run_differs,
        run_job,
        say,
        texts,
        watched_name,
    )
    from cairn.cli.chaos_verdict import classify, compare_outputs
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
        plan = plan_faults(
            seed,
            kills,
            vertices=reference.vertices or (Vertex("", reference.parallelism),),
            records_per_subtask=max(10, records // reference.parallelism),
        )
        host_plan = plan_host_faults(seed, hosts)
        markers = os.path.join(work, "fault-markers")
        os.makedirs(markers)
        try:
            cluster = starting.result()
        except HostsDown as error:
            say(f"--profile hosts: {error}")
            return 2
        say(
            f"the run on simulated hosts under {len(host_plan)} host faults and {len(plan)} "
            f"worker kills ({reference.seconds:.1f} s without, locally)"
        )
        chaos, outcomes, started = _hosts_run(
            args, cluster, work, plan, markers, host_plan, reference
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
        print(f"  the driver's log: {os.path.join(work, 'driver.log')}")
        print(f"  replay: {command}")
        return 1
    diffs = compare_outputs(texts(reference), chaos.outputs)
    control_differs = None
    if diffs:
        say("outputs differ; a second run without faults (the control, local)")
        control_differs = control_run_differs(args, work, reference)
    outside = frozenset(watched_name(p) for p in args.compare)
    cause = classify(diffs, outside_sinks=outside, control_differs=control_differs)
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
    )
    print("\n".join([text, *host_lines(outcomes, started, diffs[0] if diffs else None)]))
    return 1 if diffs else 0


def _hosts_run(
    args: argparse.Namespace,
    cluster: Any,
    work: str,
    plan: Sequence[Any],
    markers: str,
    host_plan: Sequence[HostFault],
    reference: Any,
) -> tuple[Any, list[HostOutcome], float]:
    """The faulted run on ``cluster`` (this run's own, started): the driver on its host,
    the host faults made in turn while it runs; (its ``RunResult``, each host fault's
    outcome, when the driver started)."""
    from cairn.cli.chaos_outputs import appended_records, snapshot
    from cairn.cli.chaos_run import say
    from cairn.testing.fault_plan import faults_text
    from cairn.testing.host_faults import aim, make_and_heal

    watched = {path: snapshot(path) for path in args.compare}
    progress = os.path.join(work, "hosts-progress")
    result_path = os.path.join(work, "hosts-result.json")
    outcomes: list[HostOutcome] = []
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
            "faults": faults_text(tuple(plan), markers) if plan else "",
            "cwd": os.getcwd(),
            "progress": progress,
            "result": result_path,
        }
        spec_path = os.path.join(work, "hosts-spec.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f, default=str)  # an option of another type: as text
        started = time.time()
        driver = cluster.start_driver(
            [sys.executable, "-m", "cairn.cli.chaos_hosts_driver", spec_path]
        )
        deadline = time.monotonic() + args.minutes * 60 + 120  # and the Spark session's start
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
            make_and_heal(cluster, fault.kind, target, fault.duration_s)
            outcomes.append(HostOutcome(fault, target, made, time.time()))
            healed_at = _read_progress(progress)
        with contextlib.suppress(Exception):
            driver.wait(max(1.0, deadline - time.monotonic()))
        if driver.poll() is None:
            cluster.kill_host("driver")
            driver.wait(30)
        result = _read_result(result_path, driver.returncode, cluster.log_tail("driver", "driver"))
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
    return result, outcomes, started


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
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _await_checkpoint(path: str, since: int, driver: Any, deadline: float) -> bool:
    """Whether the job completed a checkpoint after the ``since``-th one while its driver
    runs, before ``deadline``."""
    while time.monotonic() < deadline and driver.poll() is None:
        if _read_progress(path) > since:
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
    )
    return result
