"""The shared life cycle of the test setup's servers: what ``stop()``, ``kill()`` and a failed
start leave behind (nothing), on real child processes."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from cairn.testing.managed_server import ManagedServer, retry_on_port_clash

# A server that starts a grandchild (a process group of two) and ignores SIGTERM when asked.
_SCRIPT = """
import signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("serving", flush=True)
time.sleep(60)
"""


class SleepServer(ManagedServer):
    stop_grace_s = 0.5

    def __init__(self, mode: str = "polite", *, ready: bool = True) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="cairn-test-managed-")))
        self.mode = mode
        self.ready = ready

    def start(self) -> SleepServer:
        self._spawn([sys.executable, "-c", _SCRIPT, self.mode], "server.log")
        self._guard_start(self._await_ready)
        return self

    def _await_ready(self) -> None:
        deadline = time.monotonic() + 10
        while "serving" not in (self.root / "server.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        if not self.ready:
            raise RuntimeError("never serves")

    def group(self) -> list[psutil.Process]:
        assert self._proc is not None
        pgid = self._proc.pid
        return [p for p in psutil.process_iter() if _pgid(p) == pgid]


def _pgid(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except (ProcessLookupError, psutil.Error):
        return None


def _gone(procs: list[psutil.Process]) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=5)
    return not alive


@pytest.mark.parametrize("mode", ["polite", "stubborn"])
def test_stop_ends_the_whole_group_and_removes_root(mode: str) -> None:
    server = SleepServer(mode).start()
    procs = server.group()
    assert len(procs) == 2  # the server and its grandchild
    started = time.monotonic()
    server.stop()
    assert _gone(procs)
    assert not server.root.exists()
    assert not server.running
    if mode == "stubborn":  # SIGTERM ignored: SIGKILL after the grace period
        assert time.monotonic() - started >= server.stop_grace_s


def test_kill_keeps_the_files_for_a_restart() -> None:
    server = SleepServer().start()
    procs = server.group()
    server.kill()
    assert _gone(procs)
    assert (server.root / "server.log").exists()
    server.start()
    assert server.running
    server.stop()


def test_a_failed_start_in_with_leaves_nothing() -> None:
    server = SleepServer(ready=False)
    with pytest.raises(RuntimeError, match="never serves"), server:
        pass
    assert not server.root.exists()
    assert server._proc is None


def test_retry_on_port_clash_tries_new_ports_then_gives_up() -> None:
    tries: list[int] = []

    def start_once() -> str:
        tries.append(len(tries))
        if len(tries) < 3:
            raise RuntimeError("bind: Address already in use")
        return "served"

    renewed: list[int] = []
    assert retry_on_port_clash(start_once, lambda: renewed.append(1)) == "served"
    assert len(renewed) == 2

    def always_taken() -> str:
        raise RuntimeError("Address already in use")

    with pytest.raises(RuntimeError, match="already in use"):
        retry_on_port_clash(always_taken, lambda: None)

    def other_error() -> str:
        raise RuntimeError("disk full")

    renewed.clear()
    with pytest.raises(RuntimeError, match="disk full"):
        retry_on_port_clash(other_error, lambda: renewed.append(1))
    assert renewed == []
    assert SleepServer.stop_signal == signal.SIGTERM


@pytest.mark.parametrize("bucket", ["x", "Cairn", "a_b", "-abc"])
def test_seaweed_refuses_an_invalid_bucket_name_before_it_starts(bucket: str) -> None:
    from cairn.testing.seaweedfs import SeaweedS3

    with pytest.raises(ValueError, match=f"invalid S3 bucket name '{bucket}'"):
        SeaweedS3(bucket=bucket)
