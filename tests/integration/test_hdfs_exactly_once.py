"""Jobs with their checkpoints on a real HDFS (Hadoop's MiniDFSCluster, two DataNodes): on real
local Spark with workers SIGKILLed while processing and during the asynchronous upload, heap
and incremental RocksDB state, the committed output compared with the failure-free output and
a savepoint on HDFS restored at another
parallelism; the retained checkpoints of a cancelled job (incremental RocksDB: shared files)
private on HDFS and listed from there by the CLI."""

from __future__ import annotations

import contextlib
import json
import posixpath
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn.common.job_status import JobStatus
from cairn.testing.hdfs import HdfsCluster
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from cairn.testing.spark_cluster import free_port
from tests.integration._readme import CHECKPOINTS_HDFS, cairn_argv, readme_line, subprocess_env
from tests.integration.jobs import expected_lines, sequence_job
from tests.integration.waits import committed_lines

RECORDS, KEYS = 60_000, 10

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]

BACKENDS = {
    "heap": {"state.backend.type": "hashmap"},
    "rocksdb-incremental": {
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
    },
}


def _modes(hdfs: HdfsCluster, path: str) -> dict[str, tuple[str, int]]:
    """Every entry under ``path`` (itself included): its type and permission bits."""
    fs = hdfs.filesystem()
    found = {path: ("directory", int(fs.info(path)["permission"]) & 0o777)}
    for directory, dirs, files in fs.walk(path, detail=True):
        for name, info in {**dirs, **files}.items():
            found[posixpath.join(directory, name)] = (info["type"], int(info["permission"]) & 0o777)
    return found


@pytest.mark.spark
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_sigkill_with_checkpoints_on_hdfs_keeps_exactly_once(
    spark: Any, hdfs: HdfsCluster, tmp_path: Path, backend: str
) -> None:
    out = str(tmp_path / "out")
    storage = hdfs.url("eo", backend)
    conf = {
        "cairn.executor": "spark",
        "execution.checkpointing.dir": storage,
        **BACKENDS[backend],
        **hdfs.flink_config(),
        "cairn.testing.faults": (
            "point=processing,attempt=0,records=15000,subtask=1;"
            "point=during-upload,attempt=1,subtask=0"
        ),
    }
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, retain=True)
    client = env.execute_async(f"exactly-once-on-hdfs-{backend}")
    client.get_job_execution_result(timeout=300)
    master = client.job_master
    assert master.restarts == 2, "both scheduled kills must have happened"
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)

    stats = client.get_checkpoint_statistics()
    assert stats is not None and stats.counts.completed >= 1
    assert stats.latest_completed is not None
    assert stats.latest_completed.path.startswith(storage + "/" + master.job_id + "/chk-")


@pytest.mark.timeout(300)
def test_savepoint_on_hdfs_restores_at_another_parallelism(
    hdfs: HdfsCluster, tmp_path: Path
) -> None:
    out = str(tmp_path / "out")
    records = 60_000
    conf = {
        "cairn.executor": "inprocess",
        "execution.checkpointing.dir": hdfs.url("sp", "chk"),
        **BACKENDS["rocksdb-incremental"],
        **hdfs.flink_config(),
    }
    client = sequence_job(conf, out, records=records, keys=KEYS, rate=10_000).execute_async(
        "savepoint-on-hdfs"
    )
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    committed_lines(out)
    target = hdfs.url("sp", "savepoints", "one")
    stopped = client.stop_with_savepoint(False, target).result(timeout=120)
    assert stopped == target
    fs = hdfs.filesystem()
    assert fs.exists("/sp/savepoints/one/_metadata")
    assert int(fs.info("/sp/savepoints/one/_metadata")["permission"]) & 0o777 == 0o600
    first = len(read_visible_lines(out))
    assert 0 < first < records

    restored = {**conf, "execution.savepoint.path": stopped}
    sequence_job(restored, out, records=records, keys=KEYS, rate=None, parallelism=3).execute(
        "restored-from-hdfs"
    )
    lines = read_visible_lines(out)
    assert check_sequence_lines(lines).violations == []
    assert sorted(lines) == expected_lines(records, KEYS)


def test_cli_lists_retained_checkpoints_on_hdfs(hdfs: HdfsCluster, tmp_path: Path) -> None:
    """A cancelled job keeps its checkpoints (RETAIN_ON_CANCELLATION); the docs' line lists
    them from HDFS; an unreachable NameNode is one line."""
    storage = hdfs.url("retained")
    conf = {
        "cairn.executor": "inprocess",
        "execution.checkpointing.dir": storage,
        **BACKENDS["rocksdb-incremental"],
    }
    env = sequence_job(
        conf, str(tmp_path / "out"), records=10_000_000, keys=KEYS, rate=20_000, retain=True
    )
    client = env.execute_async("retained-on-hdfs")
    master = client.job_master
    wait_for(
        lambda: (master.coordinator.latest_completed_id() or 0) >= 2,
        120,
        0.05,
        "two completed checkpoints",
    )
    client.cancel()
    with contextlib.suppress(Exception):
        client.get_job_execution_result(timeout=60)
    fs = hdfs.filesystem()
    on_hdfs = [p for p in fs.find(f"/retained/{master.job_id}") if p.endswith("/_metadata")]
    assert on_hdfs, f"no retained checkpoint under {storage}/{master.job_id}"
    # What the job left on HDFS is private to its user: directories 0700, files 0600; the
    # incremental checkpoints share SST files; nothing written aside stayed.
    modes = _modes(hdfs, f"/retained/{master.job_id}")
    private = {"directory": 0o700, "file": 0o600}
    assert {p: oct(m) for p, (kind, m) in modes.items() if m != private[kind]} == {}
    assert [p for p, (kind, _) in modes.items() if "/shared/" in p and kind == "file"]
    assert not [p for p in modes if ".inprogress-" in p]
    cli = subprocess.run(
        [
            *cairn_argv(
                readme_line(CHECKPOINTS_HDFS),
                **{"hdfs://namenode:9000/flink/checkpoints": storage},
            ),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(tmp_path),
    )
    assert cli.returncode == 0, cli.stderr
    listed = [c for c in json.loads(cli.stdout) if c["job_id"] == master.job_id]
    ids_on_hdfs = {int(p.split("/chk-")[1].split("/")[0]) for p in on_hdfs}
    assert {c["id"] for c in listed if c["usable"]} == ids_on_hdfs
    unreachable = subprocess.run(
        [
            sys.executable,
            "-m",
            "cairn.cli.main",
            "checkpoints",
            f"hdfs://127.0.0.1:{free_port()}/flink/checkpoints",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(tmp_path),
    )
    assert unreachable.returncode != 0
    assert len(unreachable.stderr.strip().splitlines()) == 1, unreachable.stderr
