"""On real Spark: a job with internal TLS on runs exactly once through a killed worker, and
PySpark's own Python sockets (the driver's accumulator server, the executors' Python daemon)
are Unix domain sockets in a private directory, so a flood of idle loopback connections on
every TCP port of the driver's and daemon's Python processes neither wedges the accumulator
server (jobs used to end 60 s late) nor makes the daemon fork per connection."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.attempt_driver import AttemptDriver
from cairn.runtime.network.certificates import make_job_certificates
from cairn.testing.sequence_jobs import read_visible_lines
from tests.connection_flood import Address, ConnectionFlood
from tests.integration.jobs import expected_lines, sequence_job

pytestmark = pytest.mark.spark

RECORDS, KEYS = 20_000, 8


def test_a_job_with_internal_tls_runs_exactly_once_through_a_killed_worker(
    spark: Any, tmp_path: Path
) -> None:
    certs = make_job_certificates(tmp_path / "tls")
    internal = {k: v for k, v in certs.options().items() if ".internal." in k}
    faults = "point=processing,attempt=0,records=3000,subtask=1"
    conf = {"cairn.executor": "spark", **internal, "cairn.testing.faults": faults}
    out = str(tmp_path / "out")
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, rate=10_000)
    client = env.execute_async("tls-failover")
    client.get_job_execution_result(timeout=90)
    assert client.get_job_status() is JobStatus.FINISHED
    assert client.job_master.restarts == 1
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)


def _python_processes() -> list[psutil.Process]:
    """This driver and the Python processes under Spark's JVM (its daemon, workers)."""
    me = psutil.Process()
    found = [me]
    for child in me.children(recursive=True):
        try:
            if "python" in child.name().lower():
                found.append(child)
        except psutil.Error:
            pass
    return found


def _tcp_listeners() -> list[Address]:
    """Every loopback TCP port a Python process of this Spark application listens on."""
    ports: list[Address] = []
    for process in _python_processes():
        try:
            connections = process.net_connections(kind="inet")
        except psutil.Error:
            continue
        for c in connections:
            if c.status == psutil.CONN_LISTEN and c.laddr.ip in ("127.0.0.1", "::1"):
                ports.append((c.laddr.ip, c.laddr.port))
    return ports


class _Listeners:
    """``_tcp_listeners``, scanned at most every half second (a scan reads /proc per
    process; the flood asks for every connection it opens)."""

    def __init__(self) -> None:
        self._at = 0.0
        self._ports: list[Address] = []
        self.seen: set[Address] = set()

    def __call__(self) -> list[Address]:
        if time.monotonic() - self._at > 0.5:
            self._ports = _tcp_listeners()
            self.seen.update(self._ports)
            self._at = time.monotonic()
        return self._ports


def _daemons() -> list[psutil.Process]:
    daemons = []
    for process in _python_processes():
        try:
            if "cairn.deploy.spark_daemon" in " ".join(process.cmdline()):
                daemons.append(process)
        except psutil.Error:
            pass
    return daemons


def test_pysparks_sockets_are_off_tcp_and_a_flood_does_not_delay_the_job(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = spark.sparkContext._accumulatorServer
    assert isinstance(server.server_address, str), "the accumulator server is on TCP"
    socket_dir = os.path.dirname(server.server_address)
    info = os.stat(socket_dir)
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()

    out = str(tmp_path / "out")
    # ~10 s of input, so that the flood is under way while the job runs (unthrottled, a fast
    # machine finished the job before the flood had opened its 200 connections)
    env = sequence_job({"cairn.executor": "spark"}, out, records=RECORDS, keys=KEYS, rate=2_000)
    # How long the job master waits for the finished Spark stage to end: a wedged
    # accumulator server kept Spark's scheduler from ending it for the 60 s of that wait.
    teardowns: list[float] = []
    original = AttemptDriver.teardown

    def timed(driver: AttemptDriver, *args: Any, **kwargs: Any) -> None:
        started = time.monotonic()
        try:
            original(driver, *args, **kwargs)
        finally:
            teardowns.append(time.monotonic() - started)

    monkeypatch.setattr(AttemptDriver, "teardown", timed)
    listeners = _Listeners()
    with ConnectionFlood(listeners, count=200, max_seconds=120) as flood:
        client = env.execute_async("flooded-python-ports")
        flood.wait_started(timeout=90)
        during_the_job = not client.get_job_status().is_globally_terminal_state()
        client.get_job_execution_result(timeout=120)
        daemons = _daemons()
    assert flood.opened >= 200, f"the flood opened {flood.opened} connections to {listeners.seen}"
    assert during_the_job, "the flood's connections were all open only after the job ended"
    assert client.get_job_status() is JobStatus.FINISHED
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
    assert teardowns and max(teardowns) < 20, f"the stage took {teardowns} s to end"
    assert daemons, "no Python daemon ran"
    for daemon in daemons:
        kinds = {
            c.family.name
            for c in daemon.net_connections(kind="all")
            if c.status in (psutil.CONN_LISTEN, psutil.CONN_NONE)
        }
        listening_tcp = [
            c for c in daemon.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
        ]
        assert not listening_tcp, f"the Python daemon listens on TCP: {listening_tcp}"
        assert "AF_UNIX" in kinds
