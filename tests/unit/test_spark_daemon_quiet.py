"""A Python worker forked by Spark's daemon says nothing when the JVM closed its socket first
(a job that ended, a stage cancelled): PySpark's own ``daemon.worker`` on a socket whose peer
is gone, with Spark 4's ``killWorkerOnFlushFailure`` on (the flush re-raised) and off (the
failure printed)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pyspark.daemon
import pytest

from cairn.deploy.spark_daemon import quiet_worker

_KILL_ON_FLUSH_FAILURE = "PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE"


@pytest.fixture
def orphaned_socket() -> Iterator[socket.socket]:
    ours, jvm = socket.socketpair()
    jvm.close()  # the JVM went first
    yield ours
    ours.close()


@pytest.fixture(autouse=True)
def _restore_stderr() -> Iterator[None]:
    stderr = sys.stderr
    yield
    sys.stderr = stderr


def test_a_reraised_broken_pipe_ends_the_worker_quietly(
    orphaned_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(_KILL_ON_FLUSH_FAILURE, "true")
    with pytest.raises(BrokenPipeError):  # what the forked child would print in full
        pyspark.daemon.worker(orphaned_socket, True)
    assert quiet_worker(pyspark.daemon.worker)(orphaned_socket, True) == 1
    assert capfd.readouterr().err == ""


def test_a_printed_flush_failure_is_dropped(
    orphaned_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(_KILL_ON_FLUSH_FAILURE, raising=False)
    pyspark.daemon.worker(orphaned_socket, True)
    assert "BrokenPipeError" in capfd.readouterr().err  # PySpark's own report, unwrapped
    quiet_worker(pyspark.daemon.worker)(orphaned_socket, True)
    assert capfd.readouterr().err == ""


def test_other_failures_still_raise() -> None:
    def failing(*args: object) -> int:
        raise ValueError("not a closed socket")

    with pytest.raises(ValueError):
        quiet_worker(failing)()
