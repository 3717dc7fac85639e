"""Two drivers of one job under high availability, on real local Spark, with the HA and
checkpoint storage on local files and on S3 (SeaweedFS): both are started with the same
``cairn run`` command; one leads, the other stands by (log and progress line say so).

* SIGKILL of the leader: the standby takes over within the lease time (plus a poll), resumes
  from the checkpoint the HA pointer names, and the job finishes exactly once.
* SIGSTOP of the leader past its lease: the standby takes over; the old leader, woken with
  SIGCONT, completes no checkpoint and commits nothing (its log, the HA pointer, the
  ``_metadata`` files written after it woke, and the sink output say so) and ends SUSPENDED.
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
from cairn.cli.demo_jobs import read_visible_lines
from cairn.common.storage_options import s3_storage_options
from cairn.deploy.high_availability import open_store
from cairn.testing.processes import terminate_tree
from tests.integration.jobs import exactly_once_problems

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = str(Path(__file__).with_name("ha_job.py"))
REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS, KEYS, RATE = 90_000, 20, 2_000  # 45 s of input: both drivers are up long before
LEASE_S, RENEW_S = 4, 1
TAKEOVER_SLACK_S = 3.0  # a standby's poll, plus scheduling on a loaded machine


@dataclass
class Storage:
    """Where checkpoints and HA records go, and how to read the HA records and the
    ``_metadata`` files (path, modification time) from the test."""

    conf: dict[str, str]
    ha_root: str
    ha_options: dict[str, Any]
    metadata_files: Callable[[], list[tuple[str, float]]]

    def ha_store(self) -> ConditionalStore:
        roots = self._job_dirs()
        assert len(roots) == 1, roots
        return open_store(roots[0], self.ha_options)

    def _job_dirs(self) -> list[str]:
        from fsspec.core import url_to_fs

        fs, path = url_to_fs(self.ha_root, **self.ha_options)
        if not fs.exists(path):
            return []
        prefix = self.ha_root.split("://", 1)[0] + "://" if "://" in self.ha_root else ""
        return [prefix + p.rstrip("/") for p in fs.ls(path, detail=False)]

    def has_ha_records(self) -> bool:
        return bool(self._job_dirs())


@pytest.fixture(params=["file", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "file":
        root = tmp_path / "checkpoints"

        def local_metadata() -> list[tuple[str, float]]:
            return [(str(p), p.stat().st_mtime) for p in root.rglob("_metadata")]

        yield Storage(
            {"execution.checkpointing.dir": f"file://{root}"},
            f"file://{root}/_ha",
            {},
            local_metadata,
        )
        return
    request.applymarker(pytest.mark.s3)
    seaweed = request.getfixturevalue("seaweed")
    prefix = f"ha-{tmp_path.name}"
    conf = {**seaweed.flink_config(), "execution.checkpointing.dir": seaweed.url(prefix)}
    fs = seaweed.filesystem()

    def s3_metadata() -> list[tuple[str, float]]:
        fs.invalidate_cache()
        found = fs.find(f"{seaweed.bucket}/{prefix}", detail=True)
        return [
            (path, info["LastModified"].timestamp())
            for path, info in found.items()
            if path.endswith("/_metadata")
        ]

    options = s3_storage_options({**conf, "s3.path.style.access": True})
    yield Storage(conf, seaweed.url(prefix, "_ha"), options, s3_metadata)


@dataclass
class Driver:
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
    cmd += [SCRIPT, str(tmp_path / "out"), str(RECORDS), str(KEYS), str(RATE)]
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    return Driver(proc, log)


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


def _two_drivers(tmp_path: Path, storage: Storage) -> tuple[Driver, Driver, Pointer]:
    """Start both drivers at once; return (leader, standby, the pointer once the leader
    completed a few checkpoints and the standby stands by)."""
    one, two = _start(tmp_path, "one", storage), _start(tmp_path, "two", storage)
    lease = _wait(lambda: _lease(storage), "a driver takes the lease", 240, one, two)
    pid = int(lease.holder.split(":")[1])
    leader, standby = (one, two) if pid == one.proc.pid else (two, one)
    assert pid == leader.proc.pid
    _wait(lambda: "standing by" in standby.text(), "the other one stands by", 240, one, two)
    _wait(lambda: "[cairn] STANDBY" in standby.text(), "its progress line", 30, standby)

    def checkpointed() -> Pointer | None:
        p = _pointer(storage)
        return p if p is not None and p.checkpoint_id is not None and p.checkpoint_id >= 3 else None

    pointer = _wait(checkpointed, "the leader completes checkpoints", 120, one, two)
    assert leader.proc.poll() is None and standby.proc.poll() is None
    return leader, standby, pointer


def _finished_exactly_once(tmp_path: Path, standby: Driver, storage: Storage) -> None:
    assert standby.proc.wait(300) == 0, standby.text()[-4000:]
    lines = read_visible_lines(str(tmp_path / "out"))
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    final = _pointer(storage)
    assert final is not None and final.status == "FINISHED" and final.token == 2


def _completed_ids(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"Completed checkpoint (\d+) ", text)}


def test_standby_takes_over_a_killed_leader_and_the_job_finishes_once(
    tmp_path: Path, storage: Storage
) -> None:
    leader = standby = None
    try:
        leader, standby, before = _two_drivers(tmp_path, storage)
        leader.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        _wait(
            lambda: "leading this job with fencing token 2" in standby.text(),
            "takeover",
            60,
            standby,
        )
        took = time.monotonic() - killed
        assert took <= LEASE_S + TAKEOVER_SLACK_S, f"took over after {took:.1f} s"
        resumed = _wait(
            lambda: re.search(r"resuming from checkpoint (\d+)", standby.text()), "resume", 60
        )
        assert resumed is not None and int(resumed.group(1)) >= before.checkpoint_id  # type: ignore[operator]
        _finished_exactly_once(tmp_path, standby, storage)
        print(f"takeover {took:.1f} s after SIGKILL (lease {LEASE_S} s)")
    finally:
        for d in (leader, standby):
            if d is not None and d.proc.poll() is None:
                terminate_tree(d.proc.pid)


def test_a_stopped_leader_woken_after_the_takeover_completes_and_commits_nothing(
    tmp_path: Path, storage: Storage
) -> None:
    leader = standby = None
    try:
        leader, standby, _ = _two_drivers(tmp_path, storage)
        leader.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        _wait(
            lambda: "leading this job with fencing token 2" in standby.text(),
            "takeover",
            60,
            standby,
        )
        took = time.monotonic() - stopped
        assert took <= LEASE_S + TAKEOVER_SLACK_S, f"took over after {took:.1f} s"
        taken = _pointer(storage)
        assert taken is not None and taken.token == 2

        def new_leader_checkpointed() -> bool:
            p = _pointer(storage)
            return p is not None and p.checkpoint_id != taken.checkpoint_id

        _wait(new_leader_checkpointed, "the new leader completes a checkpoint", 120, standby)
        woken_at, offset = time.time(), len(leader.text())
        leader.proc.send_signal(signal.SIGCONT)
        assert leader.proc.wait(120) != 0  # suspended: env.execute() raised
        after = leader.text()[offset:]
        assert "lost the leadership" in after, after[-4000:]
        assert _completed_ids(after) == set(), after[-4000:]
        # Every _metadata written since the old leader woke is one the new leader completed.
        written = storage.metadata_files()
        time.sleep(1.0)  # the new leader logs a completion right after its _metadata
        theirs = _completed_ids(standby.text())
        for path, mtime in written:
            if mtime >= woken_at - 1:
                cid = int(re.search(r"chk-(\d+)", path).group(1))  # type: ignore[union-attr]
                assert cid in theirs, (path, theirs)
        pointer = _pointer(storage)
        assert pointer is not None and pointer.token == 2
        _finished_exactly_once(tmp_path, standby, storage)
        print(f"takeover {took:.1f} s after SIGSTOP (lease {LEASE_S} s); the old leader woke:")
        print("\n".join(line for line in after.splitlines() if "[cairn]" not in line)[-3000:])
    finally:
        for d in (leader, standby):
            if d is not None and d.proc.poll() is None:
                with_cont = d.proc.pid
                os.kill(with_cont, signal.SIGCONT)
                terminate_tree(with_cont)
