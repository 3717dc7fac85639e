"""Checkpoint storage on a real HDFS (Hadoop's MiniDFSCluster on 127.0.0.1, hdfs-native as the
client): configuration keys, a round trip with private (0700/0600) files, the atomic exclusive
publish, and the pre-flight check's one-line errors. No Spark here; the jobs on HDFS are in
test_hdfs_exactly_once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.errors import CheckpointStorageUnusableError
from cairn.checkpoint.locations import atomic_write, resolve
from cairn.checkpoint.storage import CheckpointStorage
from cairn.checkpoint.storage_access import check_storage_access
from cairn.common.config_options import validate_configuration
from cairn.common.exceptions import ConfigurationError
from cairn.datastream.checkpoint_config import checkpoint_settings_from
from cairn.testing.hdfs import HdfsCluster
from cairn.testing.spark_cluster import free_port

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]


def _mode(fs: Any, path: str) -> int:
    return int(fs.info(path)["permission"]) & 0o777


def test_hadoop_keys_become_storage_options_for_hdfs_urls_only(
    hdfs: HdfsCluster, tmp_path: Path
) -> None:
    conf_dir = tmp_path / "hadoop-conf"
    conf_dir.mkdir()
    (conf_dir / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.replication</name><value>1</value></property>"
        "<property><name>dfs.blocksize</name><value>1048576</value></property></configuration>"
    )
    conf = {
        "execution.checkpointing.dir": hdfs.url("x"),
        "fs.hdfs.hadoopconf": str(conf_dir),  # Flink's 1.x name of env.hadoop.conf.dir
        **hdfs.flink_config(),  # flink.hadoop.dfs.replication=2 wins over the file's 1
    }
    options = checkpoint_settings_from(validate_configuration(conf)).storage_options
    assert options["dfs.replication"] == "2" and options["dfs.blocksize"] == "1048576"
    assert options["dfs.client.failover.max.attempts"] == "4"  # bounded unless configured
    local = {**conf, "execution.checkpointing.dir": "/tmp/c"}
    assert checkpoint_settings_from(validate_configuration(local)).storage_options == {}
    missing = {**conf, "env.hadoop.conf.dir": str(tmp_path / "absent")}
    with pytest.raises(ConfigurationError, match=r"env\.hadoop\.conf\.dir: .*does not exist"):
        checkpoint_settings_from(validate_configuration(missing))


def test_checkpoint_files_round_trip_privately_and_discard_on_hdfs(hdfs: HdfsCluster) -> None:
    storage = CheckpointStorage(hdfs.url("roundtrip"), "job-1", {"dfs.replication": "2"})
    writer = storage.writer(7)
    rel = writer.write_state_file("keyed/op", b"0123456789")
    reader = storage.reader(writer.directory)
    assert reader.read_state_range(rel, 2, 5) == b"23456"
    fs = hdfs.filesystem()
    assert fs.ls("/roundtrip/job-1/chk-7", detail=False) == [f"/roundtrip/job-1/chk-7/{rel}"]
    # Private on a store with permissions: directories 0700 (the ones made on the way too),
    # files 0600, whatever the client's umask would have given (0755/0644).
    for directory in ("/roundtrip", "/roundtrip/job-1", "/roundtrip/job-1/chk-7"):
        assert _mode(fs, directory) == 0o700, directory
    assert _mode(fs, f"/roundtrip/job-1/chk-7/{rel}") == 0o600
    assert fs.info(f"/roundtrip/job-1/chk-7/{rel}")["owner"] == fs.info("/roundtrip")["owner"]
    storage.discard(7)
    assert not fs.exists("/roundtrip/job-1/chk-7")


def test_exclusive_publish_is_decided_by_the_namenode(hdfs: HdfsCluster) -> None:
    loc = resolve(hdfs.url("exclusive", "_metadata"), {})
    atomic_write(loc, b"first", exclusive=True)
    with pytest.raises(FileExistsError, match="exclusive/_metadata"):
        atomic_write(loc, b"second", exclusive=True)
    fs = hdfs.filesystem()
    assert fs.cat_file("/exclusive/_metadata") == b"first"
    atomic_write(loc, b"replaced")  # not exclusive: replaces, still whole
    assert fs.cat_file("/exclusive/_metadata") == b"replaced"
    assert _mode(fs, "/exclusive/_metadata") == 0o600
    assert fs.ls("/exclusive", detail=False) == ["/exclusive/_metadata"], "no file left aside"


def test_preflight_accepts_a_usable_directory_and_leaves_nothing_behind(
    hdfs: HdfsCluster,
) -> None:
    check_storage_access(hdfs.url("ok", "jobs"), {})
    fs = hdfs.filesystem()
    assert fs.ls("/ok/jobs", detail=False) == []
    assert _mode(fs, "/ok/jobs") == 0o700


def test_preflight_refuses_another_user_with_one_line(hdfs: HdfsCluster) -> None:
    """The 0700 directories really keep other users out: the NameNode refuses them, and the
    pre-flight check says so in one line (HADOOP_USER_NAME names the HDFS user)."""
    check_storage_access(hdfs.url("mine", "jobs"), {})
    code = (
        "from cairn.checkpoint.storage_access import check_storage_access as c\n"
        f"c({hdfs.url('mine', 'jobs', 'theirs')!r}, {{}})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), "HADOOP_USER_NAME": "mallory"},
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "the NameNode refused access" in last and "HADOOP_USER_NAME" in last, last
    assert "\tat org.apache" not in last  # the NameNode's stack trace stays out of it
    assert not hdfs.filesystem().exists("/mine/jobs/theirs")


def test_a_process_that_used_hdfs_still_forks(hdfs: HdfsCluster) -> None:
    """After the pre-flight check made (and fsspec cached) a client, the driver starts
    PySpark's gateway with a ``preexec_fn``: the forked child must reach its exec. It hung
    when fsspec's at-fork hook dropped the client in the child (its runtime's threads are
    the parent's). In a process of its own, so a hang fails this test instead of the run."""
    code = (
        "import os, subprocess\n"
        "from cairn.checkpoint.storage_access import check_storage_access\n"
        f"check_storage_access({hdfs.url('forks')!r}, {{}})\n"
        "subprocess.run(['true'], preexec_fn=lambda: None, check=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
        "assert os.waitpid(pid, 0)[1] == 0\n"
        "print('forked')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,  # a hung fork child is in the group, ended with it
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("a fork after using HDFS hung")
    assert proc.returncode == 0 and out.strip() == "forked", err[-2000:]


def test_preflight_fails_within_bounded_time_on_an_unreachable_namenode() -> None:
    url = f"hdfs://127.0.0.1:{free_port()}/ckpt"
    options = checkpoint_settings_from(
        validate_configuration({"execution.checkpointing.dir": url})
    ).storage_options
    started = time.monotonic()
    with pytest.raises(CheckpointStorageUnusableError, match="cannot connect to the NameNode"):
        check_storage_access(url, options)
    assert time.monotonic() - started < 30, "retries must be bounded"


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
