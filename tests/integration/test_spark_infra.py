"""Spark plumbing under real processes: local session, barrier stages, crashes, standalone cluster.

These tests pin the Spark behaviour Cairn's executor relies on: a barrier stage runs all its
tasks at once on loopback, one dead task aborts the whole job quickly, and the driver's
session survives it; on a standalone cluster a killed executor is replaced by the master.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest
from pyspark import BarrierTaskContext
from pyspark import cloudpickle as spark_cloudpickle
from pyspark.sql import SparkSession

from cairn.deploy.spark_session import (
    LOOPBACK,
    SparkMasterConflict,
    _session_conf,
    available_slots,
    default_local_master,
    get_or_create_spark,
)
from cairn.testing.processes import (
    CAIRN_DAEMON,
    EXECUTOR_CLASS,
    SubprocessFailed,
    descendant_pids,
    find_ancestor,
    find_processes,
    kill_process,
    python_workers_of,
    run_in_subprocess,
    terminate_tree,
    wait_for,
)
from cairn.testing.spark_cluster import StandaloneCluster

# Functions of this module run in Python workers and child drivers, which cannot import it.
spark_cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules[__name__])

Task = Callable[[Iterable[int]], Iterable[Any]]


def _run_barrier(spark: SparkSession, width: int, task: Task) -> list[Any]:
    rdd = spark.sparkContext.parallelize(range(width), width)
    return rdd.barrier().mapPartitions(task).collect()


def _describe_task(_: Iterable[int]) -> Iterator[tuple[int, list[str], int, int | None]]:
    ctx = BarrierTaskContext.get()
    ctx.barrier()  # all tasks of the stage are running at the same time
    addresses = [info.address for info in ctx.getTaskInfos()]
    yield ctx.partitionId(), addresses, os.getpid(), find_ancestor(os.getpid(), EXECUTOR_CLASS)


def _import_sources(_: Iterable[int]) -> Iterator[tuple[str, list[str]]]:
    import py4j
    import pyspark

    zips = [entry for entry in sys.path if entry.endswith(".zip")]
    yield f"{pyspark.__file__} {py4j.__file__}", zips


def _one_crashes_one_lingers(marker: str) -> Task:
    def run(_: Iterable[int]) -> Iterator[int]:
        if BarrierTaskContext.get().partitionId() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(3.0)  # a slow survivor: its job is over long before its task ends
        with open(marker, "w") as f:
            f.write(str(time.time()))
        yield 0

    return run


def _partition_one_crashes(_: Iterable[int]) -> Iterator[int]:
    if BarrierTaskContext.get().partitionId() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # the surviving task must be cancelled by Spark, not finish
    yield 0


def _sleep_after_marker(marker_dir: str) -> Task:
    def task(_: Iterable[int]) -> Iterator[int]:
        partition = BarrierTaskContext.get().partitionId()
        Path(marker_dir, f"running-{partition}").write_text(str(os.getpid()))
        time.sleep(60)
        yield partition

    return task


def _since(started: float) -> float:
    return round(time.monotonic() - started, 2)


# -- processes helpers (no Spark) -----------------------------------------------------------


def test_process_helpers_find_kill_and_reap_a_tree() -> None:
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, "cairn-probe"])
    try:
        child = wait_for(lambda: descendant_pids(parent.pid), timeout=10.0, message="child")[0]
        assert find_processes("cairn-probe", parent=os.getpid()) == [parent.pid]
        assert find_processes(parent=parent.pid) == [child]
        assert find_ancestor(child, "cairn-probe") == parent.pid
        assert find_ancestor(child, "no-such-command-line") is None

        assert terminate_tree(parent.pid, timeout=5.0) == []  # SIGTERM was enough
        parent.wait(timeout=5.0)
        wait_for(lambda: not psutil.pid_exists(child), timeout=5.0, message="child gone")
        assert not kill_process(child)
    finally:
        parent.kill()
        parent.wait()


def test_wait_for_returns_value_or_times_out() -> None:
    calls = iter([None, 0, "ready"])
    assert wait_for(lambda: next(calls), timeout=5.0, interval=0.01) == "ready"
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_for(lambda: False, timeout=0.2, interval=0.05, message=lambda: "the impossible")
    assert 0.2 <= time.monotonic() - started < 2.0


def _fail_in_child(text: str) -> None:
    raise ValueError(text)


def test_run_in_subprocess_returns_results_and_reraises_failures() -> None:
    assert run_in_subprocess(os.getpid) != os.getpid()
    with pytest.raises(SubprocessFailed, match=r"ValueError: boom(.|\n)*_fail_in_child"):
        run_in_subprocess(_fail_in_child, "boom")


# -- embedded local session -----------------------------------------------------------------


@pytest.fixture(scope="class")
def local_spark() -> Iterator[SparkSession]:
    """The suite's local session if one runs (left running), else one made and stopped here."""
    created = SparkSession.getActiveSession() is None
    started = time.monotonic()
    session = get_or_create_spark(None, min_slots=2)
    print(f"[timing] local session start: {_since(started)} s (created: {created})")
    yield session
    if created:
        session.stop()


@pytest.mark.spark
@pytest.mark.timeout(120)
class TestLocalSession:
    def test_session_binds_loopback_and_offers_the_slots(self, local_spark: SparkSession) -> None:
        conf = local_spark.sparkContext.getConf()
        assert (local_spark.sparkContext.master or "").startswith("local[")
        assert conf.get("spark.driver.host") == LOOPBACK
        assert conf.get("spark.driver.bindAddress") == LOOPBACK
        assert conf.get("spark.ui.enabled") == "false"
        # Python workers fork from a daemon that imported Cairn already (spark_daemon).
        assert conf.get("spark.python.daemon.module") == "cairn.deploy.spark_daemon"
        assert os.environ["SPARK_LOCAL_IP"] == LOOPBACK
        assert available_slots(local_spark) >= 2

    def test_local_driver_jvm_runs_the_quick_jit_only(self, local_spark: SparkSession) -> None:
        jvm = local_spark.sparkContext._jvm
        assert jvm is not None
        args = list(
            jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        )
        assert "-XX:TieredStopAtLevel=1" in args
        (log4j2,) = [a for a in args if a.startswith("-Dlog4j2.configurationFile=")]
        assert os.path.isfile(log4j2.split("=", 1)[1]), log4j2  # shipped with the package

    def test_running_session_is_reused_and_never_replaced(self, local_spark: SparkSession) -> None:
        assert get_or_create_spark(None, min_slots=1) is local_spark
        assert get_or_create_spark(local_spark.sparkContext.master) is local_spark
        with pytest.raises(SparkMasterConflict):
            get_or_create_spark("local[7]")

    def test_barrier_stage_runs_all_tasks_together_on_loopback(
        self, local_spark: SparkSession
    ) -> None:
        started = time.monotonic()
        results = sorted(_run_barrier(local_spark, 2, _describe_task))
        cold = _since(started)
        started = time.monotonic()
        _run_barrier(local_spark, 2, _describe_task)
        print(f"[timing] local barrier stage of 2: {cold} s cold, {_since(started)} s warm")

        assert [partition for partition, *_ in results] == [0, 1]
        for _, addresses, _, _ in results:
            assert len(addresses) == 2
            assert all(address.startswith(f"{LOOPBACK}:") for address in addresses)
        workers = {pid for _, _, pid, _ in results}
        assert len(workers) == 2  # two Python workers at once
        # Idle workers are kept for reuse, so they are still children of the driver JVM.
        driver_jvm = find_ancestor(next(iter(workers)), "SparkSubmit")
        assert driver_jvm is not None and workers <= set(python_workers_of(driver_jvm))
        # Forked by Cairn's daemon, which imported the worker's code before forking.
        for pid in workers:
            parent = psutil.Process(pid).parent()
            assert parent is not None and CAIRN_DAEMON in " ".join(parent.cmdline())

    def test_workers_import_the_installed_pyspark_not_its_zip(
        self, local_spark: SparkSession
    ) -> None:
        # Spark puts pyspark.zip first on a worker's path; imported from there, every module
        # compiles from source and a fresh worker spent ~1 s before its task (spark_daemon).
        for files, zips in _run_barrier(local_spark, 2, _import_sources):
            assert ".zip" not in files, files
            assert not [z for z in zips if "pyspark" in z or "py4j" in z], zips

    def test_a_deployment_ends_only_when_its_tasks_have_ended(
        self, local_spark: SparkSession, tmp_path: Path
    ) -> None:
        # A failed barrier job ends for collect() at once; its surviving task runs on (a
        # barrier failure does not interrupt it). The next attempt must not start beside it.
        from cairn.deploy.executors import _SparkDeployment

        sc = local_spark.sparkContext
        deployment = object.__new__(_SparkDeployment)
        deployment._sc = sc
        deployment._group = f"drain-{os.getpid()}-{time.monotonic_ns()}"
        marker = str(tmp_path / "survivor-ended")
        sc.setJobGroup(deployment._group, "drain test", interruptOnCancel=False)
        try:
            with pytest.raises(Exception, match="barrier"):
                _run_barrier(local_spark, 2, _one_crashes_one_lingers(marker))
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert not os.path.exists(marker)  # collect() returned while the survivor ran
        deployment._await_tasks_ended(30.0)
        ended = float(Path(marker).read_text())
        assert time.time() >= ended  # returned after the survivor's last line ran

    def test_crashed_python_worker_aborts_job_fast_and_session_survives(
        self, local_spark: SparkSession
    ) -> None:
        started = time.monotonic()
        with pytest.raises(Exception, match="barrier") as failure:
            _run_barrier(local_spark, 2, _partition_one_crashes)
        abort = _since(started)
        assert type(failure.value).__name__ == "Py4JJavaError"
        assert "Python worker exited unexpectedly" in str(failure.value)
        assert abort < 10.0  # the sleeping peer (60 s) was cancelled, not awaited

        started = time.monotonic()
        assert sorted(p for p, *_ in _run_barrier(local_spark, 2, _describe_task)) == [0, 1]
        print(
            f"[timing] local abort after worker SIGKILL: {abort} s; "
            f"next barrier job: {_since(started)} s"
        )


def test_only_local_mode_gets_the_quick_jit_and_a_job_setting_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = "-XX:TieredStopAtLevel=1"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    for local in ("local[2]", "local"):
        options = _session_conf(local, {})["spark.driver.extraJavaOptions"]
        assert options.split()[0] == quick and "log4j2-local.properties" in options
    # The user's own log4j2 configuration in Spark's conf directory is left to work.
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert _session_conf("local[2]", {})["spark.driver.extraJavaOptions"] == quick
    for master in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "yarn"):
        assert "spark.driver.extraJavaOptions" not in _session_conf(master, {})
    mine = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert _session_conf("local[2]", mine)["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_created_sessions_keep_pysparks_sockets_off_tcp() -> None:
    local = _session_conf("local[2]", {})
    assert local["spark.python.unix.domain.socket.enabled"] == "true"
    socket_dir = local["spark.python.unix.domain.socket.dir"]
    assert os.stat(socket_dir).st_mode & 0o777 == 0o700  # only this user reaches the files
    cluster = _session_conf("spark://127.0.0.1:7077", {})
    assert cluster["spark.python.unix.domain.socket.enabled"] == "true"
    # Executors on other hosts have their own temporary directory, not this one.
    assert "spark.python.unix.domain.socket.dir" not in cluster
    off = {"spark.python.unix.domain.socket.enabled": "false"}
    assert _session_conf("local[2]", off)["spark.python.unix.domain.socket.enabled"] == "false"


def test_yarn_sessions_get_short_socket_paths_and_executors_for_every_slot() -> None:
    conf = _session_conf("yarn", {}, min_slots=3)
    # A container's working directory would make the socket path longer than 107 bytes.
    assert conf["spark.python.unix.domain.socket.dir"] == "/tmp"
    assert (conf["spark.executor.instances"], conf["spark.executor.cores"]) == ("3", "1")
    two_cores = _session_conf("yarn", {"spark.executor.cores": "2"}, min_slots=3)
    assert (two_cores["spark.executor.instances"], two_cores["spark.executor.cores"]) == ("2", "2")
    mine = _session_conf("yarn", {"spark.executor.instances": "5"}, min_slots=3)
    assert mine["spark.executor.instances"] == "5"


def test_default_master_fits_a_barrier_stage_of_min_slots() -> None:
    assert default_local_master(64) == "local[64]"
    assert default_local_master(1) == f"local[{os.cpu_count()}]"


# -- standalone cluster ---------------------------------------------------------------------


def _cluster_driver(master_url: str, worker_pids: list[int], markers: str) -> dict[str, Any]:
    """Driver side of the cluster scenario; runs in a child (one SparkContext per process).

    Returns facts for the tests to assert on. The test process kills the executor once both
    long tasks run and writes ``killed`` = {"pid", "at" (wall clock)} into ``markers``.
    """
    facts: dict[str, Any] = {}
    started = time.monotonic()
    spark = get_or_create_spark(master_url, min_slots=2)
    wait_for(lambda: available_slots(spark) >= 2, timeout=60.0, message="2 executor slots")
    facts["session_start_s"] = _since(started)
    facts["executors_before"] = find_processes(EXECUTOR_CLASS, parent=worker_pids)

    started = time.monotonic()
    facts["first_job"] = sorted(_run_barrier(spark, 2, _describe_task))
    facts["first_job_s"] = _since(started)

    errors: list[str] = []
    ended: list[float] = []

    def long_job() -> None:
        try:
            _run_barrier(spark, 2, _sleep_after_marker(markers))
        except Exception as exc:  # the expected outcome: the job aborts
            errors.append(str(exc))
        ended.append(time.time())

    job = threading.Thread(target=long_job, daemon=True)
    job.start()
    killed_file = Path(markers, "killed")
    wait_for(killed_file.exists, timeout=90.0, message="the test to kill an executor")
    killed = json.loads(killed_file.read_text())
    job.join(timeout=30.0)
    facts["long_job_errors"] = errors
    facts["abort_s"] = round(ended[0] - killed["at"], 2) if ended else None

    def replaced() -> bool:
        executors = find_processes(EXECUTOR_CLASS, parent=worker_pids)
        return (
            len(executors) == 2 and killed["pid"] not in executors and available_slots(spark) >= 2
        )

    wait_for(replaced, timeout=60.0, message="a relaunched executor")
    facts["relaunch_s"] = round(time.time() - killed["at"], 2)
    facts["executors_after"] = find_processes(EXECUTOR_CLASS, parent=worker_pids)

    started = time.monotonic()
    facts["job_after_relaunch"] = sorted(_run_barrier(spark, 2, _describe_task))
    facts["job_after_relaunch_s"] = _since(started)
    spark.stop()
    return facts


@pytest.fixture(scope="class")
def cluster(_session_cluster: StandaloneCluster) -> StandaloneCluster:
    """The session's cluster (tests/integration/conftest.py), idle when the class starts."""
    _session_cluster.wait_idle()
    return _session_cluster


@pytest.fixture(scope="class")
def cluster_run(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Runs ``_cluster_driver`` against ``cluster`` and kills an executor mid-job."""
    markers = tmp_path_factory.mktemp("markers")
    outcome: dict[str, Any] = {}

    def drive() -> None:
        try:
            outcome["facts"] = run_in_subprocess(
                _cluster_driver,
                cluster.master_url,
                cluster.worker_pids,
                str(markers),
                timeout=150.0,
            )
        except BaseException as exc:  # re-raised below, in the test's thread
            outcome["error"] = exc

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    both_running = [markers / "running-0", markers / "running-1"]
    wait_for(
        lambda: all(p.exists() for p in both_running) or not driver.is_alive(),
        timeout=120.0,
        message=lambda: f"long barrier tasks\n{cluster.log_tails()}",
    )
    if driver.is_alive():
        outcome["executors_at_kill"] = cluster.executor_pids()
        killed_at = time.time()
        victim = cluster.kill_executor()
        outcome["victim"] = victim
        (markers / "killed.tmp").write_text(json.dumps({"pid": victim, "at": killed_at}))
        (markers / "killed.tmp").rename(markers / "killed")  # atomic for the child's poll
    driver.join(timeout=160.0)
    if "error" in outcome:
        raise outcome["error"]
    timings = {k: v for k, v in outcome["facts"].items() if k.endswith("_s")}
    print(f"[timing] cluster scenario: {timings}")
    return outcome


@pytest.mark.spark
@pytest.mark.cluster
@pytest.mark.timeout(240)
class TestStandaloneCluster:
    def test_cluster_is_up_with_two_alive_workers(self, cluster: StandaloneCluster) -> None:
        assert cluster.master_url.startswith(f"spark://{LOOPBACK}:")
        assert cluster.alive_workers() == 2
        assert all(psutil.pid_exists(pid) for pid in cluster.pids)
        assert cluster.executor_pids() == []  # no application yet

    def test_barrier_stage_spans_two_executors(self, cluster_run: dict[str, Any]) -> None:
        facts = cluster_run["facts"]
        assert [partition for partition, *_ in facts["first_job"]] == [0, 1]
        executors = {executor for *_, executor in facts["first_job"]}
        assert executors == set(facts["executors_before"]) and len(executors) == 2
        addresses = facts["first_job"][0][1]
        assert len(set(addresses)) == 2
        assert all(address.startswith(f"{LOOPBACK}:") for address in addresses)

    def test_killed_executor_aborts_the_barrier_job_fast(self, cluster_run: dict[str, Any]) -> None:
        facts = cluster_run["facts"]
        assert cluster_run["victim"] in cluster_run["executors_at_kill"]
        assert len(facts["long_job_errors"]) == 1
        assert "barrier" in facts["long_job_errors"][0]
        assert facts["abort_s"] is not None and facts["abort_s"] < 10.0

    def test_master_relaunches_the_executor_and_the_next_job_runs(
        self, cluster_run: dict[str, Any]
    ) -> None:
        facts = cluster_run["facts"]
        after = set(facts["executors_after"])
        assert len(after) == 2 and cluster_run["victim"] not in after
        assert [partition for partition, *_ in facts["job_after_relaunch"]] == [0, 1]
        assert {executor for *_, executor in facts["job_after_relaunch"]} == after
