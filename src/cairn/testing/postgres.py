"""A throw-away PostgreSQL server on 127.0.0.1 for tests and local experiments.

Invariant: the server is one process group that ``stop()`` ends (SIGINT, PostgreSQL's fast
shutdown, then SIGKILL after a grace period); it listens only on loopback (its Unix socket in
its own directory), keeps its data under one temporary directory that ``stop()`` removes, and
accepts only password logins (SCRAM-SHA-256) of its one user, so a wrong password is really
refused. ``max_prepared_transactions`` is set, as an exactly-once JDBC sink needs it.

The binaries are Debian's (``apt-get install postgresql``: ``/usr/lib/postgresql/<v>/bin``)
or whatever ``pg_config --bindir`` / ``PATH`` names. PostgreSQL refuses to run as root: as
root the server runs as the ``postgres`` system user the Debian package creates.

Example::

    with PostgresServer() as pg:
        url = pg.jdbc_url()            # "jdbc:postgresql://127.0.0.1:<port>/cairn"
        with pg.connect() as conn:     # a psycopg connection as the server's user
            conn.execute("CREATE TABLE t (k text, v bigint)")
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.testing.managed_server import ManagedServer, retry_on_port_clash
from cairn.testing.spark_cluster import free_port

__all__ = ["PostgresServer", "PostgresStartError", "postgres_bindir"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 5.0
USER = "cairn"
PASSWORD = "cairn-pg-secret"
DATABASE = "cairn"


class PostgresStartError(RuntimeError):
    """The server did not accept connections in time; the message carries its log's tail."""


def postgres_bindir() -> str:
    """The directory of ``initdb`` and ``postgres``: Debian's newest, else ``pg_config``'s,
    else the one on ``PATH``; ``FileNotFoundError`` says how to install them."""
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if debian:
        return os.path.dirname(debian[-1])
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        bindir = out.stdout.strip()
        if bindir and os.path.exists(os.path.join(bindir, "initdb")):
            return bindir
    initdb = shutil.which("initdb")
    if initdb is not None:
        return os.path.dirname(initdb)
    raise FileNotFoundError(
        "PostgreSQL's initdb was not found; apt-get install postgresql (or put its bin/ on PATH)"
    )


class PostgresServer(ManagedServer):
    """``initdb`` + ``postgres`` in a temporary directory, started on enter."""

    stop_signal = signal.SIGINT  # fast shutdown: abort sessions, exit
    stop_grace_s = _STOP_GRACE_S

    def __init__(
        self,
        *,
        max_prepared_transactions: int = 64,
        host: str = _HOST,
        launcher: Sequence[str] = (),
    ) -> None:
        """``host``: the address to listen on; ``launcher``: a command prefix that runs the
        server elsewhere (``["ip", "netns", "exec", <ns>]``: on a simulated host)."""
        self.bindir = postgres_bindir()
        self.host = host
        self.launcher = tuple(launcher)
        self.port = free_port()
        self.max_prepared_transactions = max_prepared_transactions
        self._as_root = os.geteuid() == 0
        # As root the server runs as 'postgres', which must reach the directory: not under a
        # private (0700) TMPDIR of the test session.
        super().__init__(
            Path(tempfile.mkdtemp(prefix="cairn-pg-", dir="/tmp" if self._as_root else None))
        )
        self._created = False

    # -- what tests use ------------------------------------------------------------------

    def jdbc_url(self, database: str = DATABASE) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = DATABASE) -> str:
        return f"postgresql://{USER}:{PASSWORD}@{self.host}:{self.port}/{database}"

    @property
    def user(self) -> str:
        return USER

    @property
    def password(self) -> str:
        return PASSWORD

    def connect(self, database: str = DATABASE, autocommit: bool = True) -> Any:
        """A psycopg connection as the server's user (autocommit by default)."""
        import psycopg

        return psycopg.connect(self.conninfo(database), autocommit=autocommit, connect_timeout=10)

    # -- life cycle ------------------------------------------------------------------------

    def _run_as(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if self._as_root else []

    def start(self) -> PostgresServer:
        data = self.root / "data"
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            for path in (self.root, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        init = subprocess.run(
            [
                *self._run_as(),
                os.path.join(self.bindir, "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if init.returncode != 0:
            raise PostgresStartError(f"initdb failed ({init.returncode}): {init.stderr[-2000:]}")
        if self.host != _HOST:
            # initdb trusts only loopback; a server on a simulated host serves its /24.
            network = ".".join(self.host.split(".")[:3]) + ".0/24"
            with open(data / "pg_hba.conf", "a", encoding="utf-8") as hba:
                hba.write(f"host all all {network} scram-sha-256\n")

        def new_port() -> None:
            self.port = free_port()

        return retry_on_port_clash(lambda: self._start_once(data), new_port)

    def _start_once(self, data: Path) -> PostgresServer:
        self._spawn(
            [
                *self.launcher,
                *self._run_as(),
                os.path.join(self.bindir, "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port),
                "-c",
                f"listen_addresses={self.host}",
                "-c",
                f"unix_socket_directories={self.root}",
                "-c",
                f"max_prepared_transactions={self.max_prepared_transactions}",
                "-c",
                "fsync=off",  # a test server: speed over crash safety of the machine
                "-c",
                "synchronous_commit=off",
            ],
            f"postgres-{self.port}.log",
            truncate=True,
        )

        def ready() -> None:
            self._await_ready()
            if not self._created:
                with self.connect("postgres") as conn:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
                self._created = True

        self._guard_start(ready)
        log.info("PostgreSQL on %s:%d (data in %s)", self.host, self.port, data)
        return self

    def _await_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise PostgresStartError(
                    f"postgres exited with {self._proc.returncode}: {self.log_tail()}"
                )
            try:
                psycopg.connect(self.conninfo("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.1)
        raise PostgresStartError(f"PostgreSQL did not start in time ({last}): {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        if self._log is not None:
            self._log.flush()
        logs = sorted(self.root.glob("postgres-*.log"), key=lambda p: p.stat().st_mtime)
        if not logs:
            return "(no log)"
        return "\n".join(logs[-1].read_text(errors="replace").splitlines()[-lines:])

    def _still_running(self, proc: subprocess.Popen[bytes]) -> bool:
        # runuser may exit before the postmaster it started: its pid file says it is gone.
        return proc.poll() is None or (self.root / "data" / "postmaster.pid").exists()

    def restart(self) -> None:
        """Start the server again on the same data directory and port (after a ``kill()``
        too: once the killed postmaster is gone, else it refuses its lock file)."""
        self._end_process(self.stop_signal)
        self._await_postmaster_gone()
        self._start_once(self.root / "data")

    def _await_postmaster_gone(self, timeout_s: float = 10.0) -> None:
        import psutil

        try:
            pid = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    time.sleep(0.05)  # not reaped yet: kill(pid, 0) still finds it
                    continue
            except psutil.NoSuchProcess:
                return
            time.sleep(0.05)
