"""The campaign's hands: inject one planned fault into a running job on the simulated hosts,
heal it, and time the recovery from the checkpoints on their storage (S3 or HDFS).

Invariant: every fault is healed before ``inject`` returns (links up, routes removed,
processes continued, disk freed, storage restarted, a lost DataNode started again, a
killed host's Spark worker started
again), so faults never pile up across the schedule; a lost driver is started again with the
same command (it resumes the lost run), and each of those reruns is counted. Jobs running at
once (one Injector each) take turns: no two faults are ever in effect together. A fault is
counted where it aimed only if it landed there (see ``Injector._make``), else as missed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.chaos_plan import STORE_FAULTS, ExternalFault, RunVerdict, internal_faults
from cairn.testing.host_faults import HOST_FAULTS, ON_A_JOB_HOST, aim, make_and_heal
from cairn.testing.netns_cluster import NetnsCluster

log = logging.getLogger("bench.chaos")

_RECOVERY_TIMEOUT_S = 600.0  # a loaded 2-core machine: restarts take minutes
_JOB_ID = re.compile(r"[0-9a-f]{32}")
# Concurrent jobs (one Injector each) take turns: a fault is made and healed before the
# next one, of any job, is made; their recoveries overlap.
_ONE_FAULT_AT_A_TIME = threading.Lock()
# ``(made, healed)`` monotonic times of every fault made in this process, by any Injector:
# the campaign's steady windows lie outside them (a host fault hits every job).
_MADE: list[tuple[float, float]] = []


class Injector:
    def __init__(
        self,
        cluster: NetnsCluster,
        *,
        argv: list[str],
        checkpoints: str,
        faults_file: Path,
        marker: Path,
        unaligned: bool,
        seed: int,
        verdict: RunVerdict,
        driver_host: str = "driver",
    ) -> None:
        self.cluster = cluster
        self.driver_host = driver_host  # this job's driver host (one per concurrent job)
        self.argv = argv
        self.checkpoints = _filesystem_path(checkpoints)
        self.faults_file = faults_file
        self.marker = marker
        self.unaligned = unaligned
        self.seed = seed
        self.verdict = verdict
        self.rng = random.Random(seed)
        self.driver: subprocess.Popen[bytes] | None = None
        self.driver_runs = 0
        self.expect_driver_loss = False
        self.metadata_fault = False
        self.completions: list[tuple[float, int]] = []  # (monotonic time, checkpoint id)
        self.max_checkpoint = 0
        self.job_id: str | None = None
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, daemon=True, name="chk-monitor")
        self._monitor.start()

    # -- the driver ------------------------------------------------------------------------

    def start_driver(self) -> None:
        self.metadata_fault = "driver-metadata" in self.faults_file.read_text()
        self.driver = self.cluster.start_driver(
            self.argv, name=f"driver-{self.driver_runs}", host_name=self.driver_host
        )
        self.driver_runs += 1

    def ensure_driver(self) -> bool:
        """Start the driver again if it was lost (its command resumes the lost run); True
        if it did."""
        if self.driver is None or self.driver.poll() is None:
            return False
        rc = self.driver.returncode
        if rc == 0:
            raise RuntimeError("the job ended before it was stopped")
        if not self.expect_driver_loss and "driver-metadata" not in self.fired_text():
            self.verdict.notes.append(
                f"driver run {self.driver_runs - 1} exited {rc} without a driver fault: "
                + self.cluster.log_tail(self.driver_host, f"driver-{self.driver_runs - 1}", 5)
            )
        self.expect_driver_loss = False
        if self.metadata_fault and "driver-metadata" in self.faults_file.read_text():
            # Fired (or the run died first): later runs go without it.
            self.faults_file.write_text(
                internal_faults(
                    self.seed + self.driver_runs, str(self.marker), unaligned=self.unaligned
                )
            )
        log.info("driver lost (exit %s): running the same command again", rc)
        self.start_driver()
        return True

    def stop_job(self, savepoint: str) -> None:
        """Stop-with-savepoint through ``cairn stop`` on the driver host; wait for the end."""
        for attempt in range(5):
            self.ensure_driver()
            self.await_checkpoints(1, timeout=_RECOVERY_TIMEOUT_S, since=time.monotonic())
            assert self.job_id is not None
            cli = self.cluster.start_driver(
                [
                    sys.executable,
                    "-m",
                    "cairn.cli.main",
                    "stop",
                    "--savepoint-path",
                    f"{savepoint}-{attempt}",
                    self.job_id,
                ],
                name=f"stop-{attempt}",
                host_name=self.driver_host,
            )
            with contextlib.suppress(subprocess.TimeoutExpired):
                cli.wait(240)
            assert self.driver is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.driver.wait(60)
            if self.driver.poll() == 0:
                return
            log.warning("stop-with-savepoint attempt %d did not end the job", attempt)
            self.verdict.notes.append(
                f"stop-with-savepoint attempt {attempt} did not end the job (exit "
                f"{cli.poll()}): " + self.cluster.log_tail(self.driver_host, f"stop-{attempt}", 3)
            )
        raise RuntimeError("the job could not be stopped with a savepoint")

    # -- faults ------------------------------------------------------------------------------

    def inject(self, fault: ExternalFault) -> None:
        """Make ``fault``, heal it, count it where it landed (or as missed, with why) and
        wait until the job checkpointed again (its recovery time)."""
        while True:
            self.ensure_driver()
            self.await_checkpoints(1, timeout=_RECOVERY_TIMEOUT_S, since=time.monotonic() - 2.0)
            aborted = self._aborted_checkpoints() if fault.kind in STORE_FAULTS else 0
            with _ONE_FAULT_AT_A_TIME:
                # Another job's fault may have hit this one while it waited for the lock.
                if any(t > time.monotonic() - 3.0 for t, _ in self.completions):
                    log.info(
                        "%s fault %d: %s on worker-%d (%.1f s)",
                        self.verdict.name,
                        fault.index,
                        fault.kind,
                        fault.target,
                        fault.duration_s,
                    )
                    made = time.monotonic()
                    try:
                        missed = self._make(self._aimed(fault))
                    finally:
                        _MADE.append((made, time.monotonic()))
                    break
        healed = time.monotonic()
        self._await_recovery(healed)
        if missed is None and fault.kind in STORE_FAULTS and self._aborted_checkpoints() == aborted:
            missed = "no checkpoint failed"  # e.g. a DataNode lost between two uploads
        if missed is None:
            self.verdict.external[(fault.kind, fault.phase)] += 1
        else:
            log.warning("fault %d (%s) missed: %s", fault.index, fault.kind, missed)
            self.verdict.missed[(fault.kind, fault.phase)] += 1
            self.verdict.notes.append(f"fault {fault.index} {fault.kind} missed: {missed}")

    def _aimed(self, fault: ExternalFault) -> ExternalFault:
        """``fault`` at another worker host if its own runs no worker of the job (both
        of the job's workers may run on one host): a host fault aims at the job."""
        running = [bool(self._workers_on(t)) for t in range(self.cluster.workers)]
        return dataclasses.replace(fault, target=aim(fault.kind, fault.target, running))

    def _make(self, fault: ExternalFault) -> str | None:
        """Make and heal ``fault``; None if it landed where it aimed, else why not."""
        host = f"worker-{fault.target}"
        c = self.cluster
        kind = fault.kind
        running = self._workers_on(fault.target)
        if kind in ON_A_JOB_HOST and not running:
            return f"{host} ran no worker of the job"
        if kind == "kill-worker":
            return None if self._kill_one_worker(fault.target) else "no worker to kill"
        if kind == "kill-executor":
            pids = c.executor_pids(host, driver=self.driver_host) or c.executor_pids(
                f"worker-{1 - fault.target}", driver=self.driver_host
            )
            for pid in pids[:1]:
                _kill(pid, signal.SIGKILL)
            return None if pids else "no executor of the job"
        if kind in HOST_FAULTS:
            make_and_heal(c, kind, fault.target, fault.duration_s, driver_host=self.driver_host)
        elif kind == "kill-during-restore":
            return self._kill_during_restore(fault)
        elif kind == "kill-during-savepoint":
            return self._kill_during_savepoint(fault)
        elif kind == "kill-driver":
            assert self.driver is not None
            if self.driver.poll() is not None:
                return "the driver was not running"
            self.expect_driver_loss = True
            if self.rng.random() < 0.5:  # the rerun loses its driver at its first _metadata
                self.faults_file.write_text(
                    internal_faults(
                        self.seed, str(self.marker), unaligned=self.unaligned, driver_metadata=True
                    )
                )
            c.kill_host(self.driver_host)
            self.driver.wait(30)
            self.ensure_driver()
        else:
            raise ValueError(f"unknown fault kind {kind}")
        return None

    def _kill_during_restore(self, fault: ExternalFault) -> str | None:
        """Kill a worker, then one of the new attempt's before it completed a checkpoint:
        the restore (or the replay right after it) of the attempt is what is hit."""
        before = set(self._all_workers())
        if not self._kill_one_worker(fault.target):
            return "no worker to kill"
        killed = time.monotonic()
        self.verdict.external[("kill-worker", "running")] += 1
        fresh = _wait(lambda: set(self._all_workers()) - before, 120.0)
        if not fresh:
            return "no worker of a new attempt within 120 s"
        time.sleep(self.rng.uniform(0.0, 1.0))
        if any(t > killed for t, _ in self.completions):
            return "the new attempt had completed a checkpoint already"
        _kill(sorted(fresh)[0], signal.SIGKILL)
        return None

    def _kill_during_savepoint(self, fault: ExternalFault) -> str | None:
        """Trigger a savepoint (``cairn savepoint``), kill a worker once the driver logged
        the trigger; landed if the savepoint had not completed by then."""
        assert self.job_id is not None and self.cluster.s3 is not None
        driver_log = self.cluster.host(self.driver_host).dir / f"driver-{self.driver_runs - 1}.log"
        seen = _read(driver_log).count("Triggering savepoint")
        self.cluster.start_driver(
            [
                sys.executable,
                "-m",
                "cairn.cli.main",
                "savepoint",
                self.job_id,
                self.cluster.s3.url("chaos", "savepoints", f"{self.seed}-{fault.index}"),
            ],
            name=f"savepoint-{fault.index}",
            host_name=self.driver_host,
        )
        text = _wait(lambda: _trigger_after(_read(driver_log), seen), 60.0)
        if not text:
            return "the savepoint was not triggered within 60 s"
        cid = text
        if not self._kill_one_worker(fault.target):
            return "no worker to kill"
        time.sleep(0.5)  # a completion logged before the kill is in the log by now
        if f"Completed savepoint {cid} " in _read(driver_log):
            return f"savepoint {cid} completed before the kill"
        return None

    def _aborted_checkpoints(self) -> int:
        """Checkpoints the job's drivers (every run of them) logged as aborted so far."""
        logs = self.cluster.host(self.driver_host).dir.glob("driver-*.log")
        return sum(_read(path).count("Aborting checkpoint ") for path in logs)

    def _await_recovery(self, since: float) -> None:
        deadline = since + _RECOVERY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.ensure_driver():
                # Another driver loss (a fault point at its first _metadata): the new
                # driver gets the whole timeout for its Spark session and restore.
                deadline = time.monotonic() + _RECOVERY_TIMEOUT_S
            done = [t for t, _ in self.completions if t > since]
            if done:
                self.verdict.recovery_s.append(done[0] - since)
                return
            time.sleep(0.2)
        self.verdict.notes.append(f"no progress for {_RECOVERY_TIMEOUT_S:.0f} s after a fault")
        raise RuntimeError("the job made no progress after a fault")

    def await_checkpoints(self, count: int, *, timeout: float, since: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.ensure_driver()
            if len([t for t, _ in self.completions if t > since]) >= count:
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"fewer than {count} checkpoints completed in {timeout:.0f} s; the driver's log "
            "ends:\n"
            + self.cluster.log_tail(self.driver_host, f"driver-{self.driver_runs - 1}", 40)
        )

    # -- processes -----------------------------------------------------------------------------

    def _workers_on(self, target: int) -> list[int]:
        """Cairn's worker processes on a worker host (not idle PySpark workers)."""
        return self.cluster.job_worker_pids(f"worker-{target}", driver=self.driver_host)

    def _all_workers(self) -> list[int]:
        return [p for t in range(self.cluster.workers) for p in self._workers_on(t)]

    def _kill_one_worker(self, target: int) -> bool:
        pids = self._workers_on(target) or self._all_workers()
        if pids:
            _kill(self.rng.choice(pids), signal.SIGKILL)
        return bool(pids)

    # -- checkpoints on their storage -----------------------------------------------------------

    def _watch(self) -> None:
        fs: Any = None
        while not self._stop.is_set():
            try:
                if fs is None:
                    fs = self.cluster.checkpoint_filesystem()
                fs.invalidate_cache()
                if self.job_id is None:
                    self.job_id = _job_directory(fs.ls(self.checkpoints, detail=True))
                if self.job_id is not None:
                    found = fs.glob(f"{self.checkpoints}/{self.job_id}/chk-*/_metadata")
                    ids = [int(p.split("/chk-")[1].split("/")[0]) for p in found]
                    top = max(ids, default=0)
                    if top > self.max_checkpoint:
                        self.max_checkpoint = top
                        self.completions.append((time.monotonic(), top))
            except Exception:  # storage down or partitioned from the controller: retry
                fs = None
            self._stop.wait(0.3)

    def fired_text(self) -> str:
        try:
            return self.marker.read_text()
        except OSError:
            return ""

    def fired_lines(self) -> list[str]:
        return [line for line in self.fired_text().splitlines() if line.strip()]

    def close(self) -> None:
        self._stop.set()
        self.cluster.kill_host(self.driver_host)
        if self.driver is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.driver.wait(30)
        self._monitor.join(5)


def made_faults() -> list[tuple[float, float]]:
    """``(made, healed)`` monotonic times of every fault made so far in this process."""
    return list(_MADE)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _trigger_after(log_text: str, seen: int) -> str | None:
    """The id of the savepoint triggered after the first ``seen`` triggers in the log.

    >>> _trigger_after("x Triggering savepoint 7 @ 1 for job j.\\n", 0)
    '7'
    >>> _trigger_after("x Triggering savepoint 7 @ 1 for job j.\\n", 1) is None
    True
    """
    parts = log_text.split("Triggering savepoint ")
    if len(parts) - 1 <= seen:
        return None
    return parts[seen + 1].split(" ", 1)[0]


def _wait(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return None


def _filesystem_path(url: str) -> str:
    """``url`` as the storage's fsspec filesystem names it: S3's with the bucket, HDFS's
    from the root.

    >>> _filesystem_path("s3://cairn/chaos/chk"), _filesystem_path("hdfs://10.0.0.4:9000/c/chk")
    ('cairn/chaos/chk', '/c/chk')
    """
    scheme, rest = url.split("://", 1)
    return "/" + rest.split("/", 1)[1] if scheme == "hdfs" else rest


def _job_directory(entries: list[dict[str, Any]]) -> str | None:
    """The job's directory under the checkpoint root: a 32-hex-digit job id, never the
    submission check's transient ``.cairn-probe-*`` object nor any other entry."""
    for entry in entries:
        name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
        if entry.get("type") == "directory" and _JOB_ID.fullmatch(name):
            return name
    return None
