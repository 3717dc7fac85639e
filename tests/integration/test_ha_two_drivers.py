"""Drivers of one job under high availability, started with the same ``cairn run`` command:
three, so that one run of the job sees both ways to lose a leader. One leads, two stand by
(log and progress line say so); then

1. the leader is SIGSTOPped: a standby takes over within the lease (plus a poll) and resumes
   from the checkpoint the HA pointer names, on the Python workers it kept warm;
2. that new leader, once it completed a checkpoint, is SIGKILLed: the last standby takes
   over the same way;
3. the first leader is woken (SIGCONT): it completes no checkpoint and commits nothing (its
   log, the HA pointer, the ``_metadata`` files written after it woke) and ends SUSPENDED;
   the job finishes exactly once under the third leader.

With the HA records on local files, with real local Spark (the warm standby is Spark's); with
the HA records on S3 (SeaweedFS) or on HDFS (Hadoop's MiniDFSCluster), the same with the
in-process executor: what S3 or HDFS changes is the conditional writes the lease and the
pointer rest on, not Spark, and drivers without Spark start in a second.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.ha.leader import LEASE, POINTER
from cairn.checkpoint.ha.lease import Lease
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.store import ConditionalStore
from cairn.common.storage_options import s3_storage_options
from cairn.deploy.high_availability import open_store
from cairn.testing.processes import terminate_tree
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jobs import exactly_once_problems

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

SCRIPT = str(Path(__file__).with_name("ha_job.py"))
REPO_ROOT = Path(__file__).resolve().parents[2]
KEYS = 20
LEASE_S, RENEW_S = 4, 1
TAKEOVER_SLACK_S = 3.0  # a standby's poll, plus scheduling on a loaded machine
FULL_SPEED = "full-speed"  # once this file exists, the job's input is no longer throttled


@dataclass
class Storage:
    """Where checkpoints and HA records go, and how to read the HA records and the
    ``_metadata`` files (path, modification time) from the test."""

    conf: dict[str, str]
    ha_root: str
    ha_options: dict[str, Any]
    metadata_files: Callable[[], list[tuple[str, float]]]
    spark: bool = True  # real local Spark; else the in-process executor
    records: int = 75_000  # at RATE: longer than starting and warming two standbys takes
    rate: int = 1_000

    def ha_store(self) -> ConditionalStore:
        roots = self._job_dirs()
        assert len(roots) == 1, roots
        return open_store(roots[0], self.ha_options)

    def _job_dirs(self) -> list[str]:
        from fsspec.core import url_to_fs

        fs, path = url_to_fs(self.ha_root, **self.ha_options)
        if not fs.exists(path):
            return []
        return [fs.unstrip_protocol(p.rstrip("/")) for p in fs.ls(path, detail=False)]

    def has_ha_records(self) -> bool:
        return bool(self._job_dirs())


# In process: 30 s at RATE. Two standbys start in ~1 s each on a quiet machine, but CI saw
# 12 s of input three quarters gone before they stood by (load 10): the input must outlast
# the starts and both takeovers; what is left after them runs at full speed.
_RECORDS_IN_PROCESS = 30_000


@pytest.fixture(params=["file", "s3", "hdfs"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    root = tmp_path / "checkpoints"

    def local_metadata() -> list[tuple[str, float]]:
        return [(str(p), p.stat().st_mtime) for p in root.rglob("_metadata")]

    conf = {"execution.checkpointing.dir": f"file://{root}"}
    if request.param == "file":
        yield Storage(conf, f"file://{root}/_ha", {}, local_metadata)
        return
    if request.param == "hdfs":  # the same on HDFS: records published by conditional renames
        request.applymarker(pytest.mark.hdfs)
        hdfs = request.getfixturevalue("hdfs")
        ha_root = hdfs.url(f"ha-{tmp_path.name}", "_ha")
        conf["high-availability.storageDir"] = ha_root
        conf["cairn.executor"] = "inprocess"
        yield Storage(conf, ha_root, {}, local_metadata, False, _RECORDS_IN_PROCESS)
        return
    # The lease and the pointer on S3; checkpoints stay local (S3 checkpoint storage has its
    # own tests): what S3 changes here is only how the HA records are written.
    request.applymarker(pytest.mark.s3)
    seaweed = request.getfixturevalue("seaweed")
    ha_root = seaweed.url(f"ha-{tmp_path.name}", "_ha")
    conf.update(seaweed.flink_config())
    conf["high-availability.storageDir"] = ha_root
    conf["cairn.executor"] = "inprocess"
    options = s3_storage_options({**conf, "s3.path.style.access": True})
    yield Storage(conf, ha_root, options, local_metadata, False, _RECORDS_IN_PROCESS)


@dataclass
class Driver:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def _start(tmp_path: Path, name: str, storage: Storage) -> Driver:
    env = dict(os.environ)
    import cairn

    src = str(Path(cairn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    conf = {
        **storage.conf,
        "high-availability.type": "STORAGE",
        "high-availability.lease-duration": f"{LEASE_S} s",
        "high-availability.lease-renew-interval": f"{RENEW_S} s",
    }
    cmd = [sys.executable, "-m", "cairn.cli.main", "-v", "run", "-p", "2"]
    cmd += [f"-D{k}={v}" for k, v in conf.items()]
    cmd += [SCRIPT, str(tmp_path / "out"), str(storage.records), str(KEYS), str(storage.rate)]
    cmd.append(str(tmp_path / FULL_SPEED))
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    return Driver(name, proc, log)


def _wait(condition: Callable[[], Any], what: str, timeout_s: float, *drivers: Driver) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    logs = "\n".join(f"--- {d.log.name}\n{d.text()[-4000:]}" for d in drivers)
    raise AssertionError(f"{what}: not within {timeout_s} s\n{logs}")


def _lease(storage: Storage) -> Lease | None:
    if not storage.has_ha_records():
        return None
    record = storage.ha_store().read(LEASE)
    return None if record is None else Lease.decode(record.data)


def _pointer(storage: Storage) -> Pointer | None:
    if not storage.has_ha_records():
        return None
    record = storage.ha_store().read(POINTER)
    return None if record is None else Pointer.decode(record.data)


def _completed_ids(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"Completed checkpoint (\d+) ", text)}


def _says(driver: Driver, text: str) -> Callable[[], bool]:
    return lambda: text in driver.text()


def _leader(storage: Storage, token: int, drivers: list[Driver]) -> Driver:
    """The driver holding the lease with fencing ``token``, once one does."""
    lease = _wait(
        lambda: (lease := _lease(storage)) is not None and lease.token == token and lease,
        f"a driver leads with token {token}",
        300,
        *drivers,
    )
    pid = int(lease.holder.split(":")[1])
    (leader,) = [d for d in drivers if d.proc.pid == pid]
    return leader


def _take_over(
    storage: Storage, lost: Driver, signal_: signal.Signals, standbys: list[Driver]
) -> tuple[Driver, float]:
    """Send ``signal_`` to the leader ``lost``; the standby that took over (its fencing token
    one higher) and how long that took. It resumed from the pointer's checkpoint or a later
    one, and (on Spark) on the Python workers it had kept warm."""
    before = _pointer(storage)
    assert before is not None and before.token is not None and before.checkpoint_id is not None
    lost.proc.send_signal(signal_)
    sent = time.monotonic()
    token = f"leading this job with fencing token {before.token + 1}"
    _wait(lambda: any(token in d.text() for d in standbys), "takeover", 60, *standbys)
    took = time.monotonic() - sent
    (leader,) = [d for d in standbys if token in d.text()]
    assert took <= LEASE_S + TAKEOVER_SLACK_S, f"took over after {took:.1f} s"
    resumed = _wait(
        lambda: re.search(r"resuming from checkpoint (\d+)", leader.text()), "resume", 60, leader
    )
    assert int(resumed.group(1)) >= before.checkpoint_id
    if storage.spark:
        warm = "runs on 2 of the 2 Python workers the standby kept warm"
        _wait(lambda: warm in leader.text(), "the warm workers reused", 120, leader)
    print(f"{leader.name} took over {took:.1f} s after {signal_.name} (lease {LEASE_S} s)")
    return leader, took


def test_standbys_take_over_a_stopped_then_a_killed_leader_and_the_woken_one_is_fenced(
    tmp_path: Path, storage: Storage
) -> None:
    # The leader first, then two standbys: three cold starts at once would only be slower.
    drivers = [_start(tmp_path, "one", storage)]
    try:
        first = _leader(storage, 1, drivers)
        standbys = [_start(tmp_path, name, storage) for name in ("two", "three")]
        drivers += standbys
        for d in standbys:
            _wait(_says(d, "standing by"), f"{d.name} stands by", 240, *drivers)
            _wait(_says(d, "[cairn] STANDBY"), "its progress line", 30, d)
            if storage.spark:  # a standby's Spark Python workers are warm before it is needed
                _wait(_says(d, "ready for a takeover"), f"{d.name} warm", 240, *drivers)

        def checkpointed() -> bool:
            p = _pointer(storage)
            return p is not None and p.checkpoint_id is not None and p.checkpoint_id >= 3

        _wait(checkpointed, "the leader completes checkpoints", 120, *drivers)
        # Input is left for two takeovers (each new leader runs from its restored position).
        assert len(read_visible_lines(str(tmp_path / "out"))) < storage.records * 3 // 4

        # 1. The leader stops (a long GC pause, a frozen VM): a standby takes over.
        second, _ = _take_over(storage, first, signal.SIGSTOP, standbys)
        taken = _pointer(storage)
        assert taken is not None and taken.token == 2
        _wait(
            lambda: (p := _pointer(storage)) is not None and p.checkpoint_id != taken.checkpoint_id,
            "the second leader completes a checkpoint",
            120,
            second,
        )
        # 2. The new leader dies: the last standby takes over.
        (third,) = [d for d in standbys if d is not second]
        _take_over(storage, second, signal.SIGKILL, [third])

        # 3. The first leader wakes up: fenced, it completes and commits nothing.
        woken_at, offset = time.time(), len(first.text())
        first.proc.send_signal(signal.SIGCONT)
        assert first.proc.wait(120) != 0  # suspended: env.execute() raised
        after = first.text()[offset:]
        assert "lost the leadership" in after, after[-4000:]
        assert _completed_ids(after) == set(), after[-4000:]
        # Every _metadata written since it woke is one the third leader completed.
        since_woken = {
            int(re.search(r"chk-(\d+)", path).group(1))  # type: ignore[union-attr]
            for path, mtime in storage.metadata_files()
            if mtime >= woken_at - 1
        }
        # (A leader logs a completion right after writing its _metadata.)
        _wait(
            lambda: since_woken <= _completed_ids(third.text()),
            f"the third leader logs completing checkpoints {sorted(since_woken)}",
            30,
            first,
            third,
        )

        # The input lasted through every takeover; the rest need not take its 1000/s.
        (tmp_path / FULL_SPEED).touch()
        assert third.proc.wait(300) == 0, third.text()[-4000:]
        lines = read_visible_lines(str(tmp_path / "out"))
        assert exactly_once_problems(lines, storage.records, KEYS) == []
        final = _pointer(storage)
        assert final is not None and final.status == "FINISHED" and final.token == 3
        print("the first leader woke:")
        print("\n".join(line for line in after.splitlines() if "[cairn]" not in line)[-3000:])
    finally:
        for d in drivers:
            if d.proc.poll() is None:
                os.kill(d.proc.pid, signal.SIGCONT)
                terminate_tree(d.proc.pid)
