"""The life cycle every throw-away server of the test setup shares (PostgreSQL, S3, Kafka).

Invariant: a :class:`ManagedServer` runs at most one process at a time, in a session (process
group) of its own, so ending the group ends everything the server started; its log file is
open exactly while that process runs; ``stop()`` ends it (``stop_signal``, then SIGKILL after
``stop_grace_s``) and removes ``root`` when the server made it, and a failed start inside
``with`` leaves nothing behind either.

A subclass says how to start and when it serves; the base says how to end::

    class EchoServer(ManagedServer):
        def start(self) -> EchoServer:
            self._spawn(["python", "-m", "http.server", "0"], "echo.log")
            self._guard_start(lambda: time.sleep(0.5))
            return self
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, TypeVar

__all__ = ["ManagedServer", "die_with_parent", "retry_on_port_clash"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_Server = TypeVar("_Server", bound="ManagedServer")


class ManagedServer(ABC):
    """One server process in its own session under ``root``; see the module's invariant."""

    #: The polite signal ``stop()`` sends first (SIGINT is PostgreSQL's fast shutdown).
    stop_signal: ClassVar[signal.Signals] = signal.SIGTERM
    #: How long the polite signal has before SIGKILL.
    stop_grace_s: ClassVar[float] = 5.0

    def __init__(self, root: Path, *, own_root: bool = True) -> None:
        self.root = root
        self._own_root = own_root
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_path: Path | None = None

    @abstractmethod
    def start(self: _Server) -> _Server:
        """Start the process and return once it serves."""

    # -- for subclasses ----------------------------------------------------------------------

    def _spawn(
        self,
        args: Sequence[str],
        log_name: str,
        *,
        truncate: bool = False,
        preexec_fn: Callable[[], Any] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``args`` in a new session, stdout and stderr into ``root/log_name``."""
        self._log_path = self.root / log_name
        self._log = open(self._log_path, "wb" if truncate else "ab")  # noqa: SIM115
        self._proc = subprocess.Popen(
            list(args),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
        return self._proc

    def _guard_start(self, await_ready: Callable[[], None]) -> None:
        """Run ``await_ready``; if it raises (not serving, Ctrl-C), kill the process first."""
        try:
            await_ready()
        except BaseException:
            self._end_process(signal.SIGKILL)
            raise

    def _still_running(self, proc: subprocess.Popen[bytes]) -> bool:
        """Whether the server is still up; a subclass whose launcher exits before the server
        does (``runuser``) also looks at what the server leaves behind."""
        return proc.poll() is None

    def _end_process(self, sig: int) -> None:
        """Send ``sig`` to the process group (if not SIGKILL: wait up to ``stop_grace_s``),
        SIGKILL what is left, reap it, close the log."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if sig != signal.SIGKILL:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                deadline = time.monotonic() + self.stop_grace_s
                while self._still_running(proc) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if self._still_running(proc):
                    log.warning(
                        "%s ignored %s for %.0f s; killing",
                        type(self).__name__,
                        signal.Signals(sig).name,
                        self.stop_grace_s,
                    )
            if self._still_running(proc):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- what tests use ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log of the process started last."""
        if self._log is not None:
            self._log.flush()
        try:
            text = self._log_path.read_text(errors="replace") if self._log_path else ""
        except OSError:
            text = ""
        return "\n".join(text.splitlines()[-lines:]) or "(no log)"

    def pause(self) -> None:
        """SIGSTOP the server's process group: it keeps its connections and answers nothing
        (a hung or very slow server) until :meth:`resume`."""
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_group(signal.SIGCONT)

    def _signal_group(self, sig: int) -> None:
        if self._proc is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the server (a crash); its data stays for a restart."""
        self._end_process(signal.SIGKILL)

    def stop(self) -> None:
        """End the server politely (SIGKILL after the grace period), then remove its files."""
        self._end_process(self.stop_signal)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self: _Server) -> _Server:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def retry_on_port_clash(start_once: Callable[[], _T], new_ports: Callable[[], None]) -> _T:
    """``start_once()``, again on new ports (at most three tries) when it failed because a port
    it was given was taken between choosing it and binding it."""
    for attempt in range(3):
        try:
            return start_once()
        except RuntimeError as exc:
            if "already in use" not in str(exc).lower() or attempt == 2:
                raise
            log.info("a port was taken meanwhile; starting again on new ports")
            new_ports()
    raise AssertionError("unreachable")


def die_with_parent() -> None:
    """In a server's child process before exec (``_spawn``'s ``preexec_fn``): SIGKILL it when
    the thread that started it ends (Linux ``PR_SET_PDEATHSIG``), so a test run killed by a
    timeout leaves no server behind. Elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
