"""The registry of the jobs running on this machine: one JSON file per job in a private
per-user directory (``<tmp>/cairn-jobs-<uid>``, 0700), holding what a client needs to reach
the job's control endpoint (its URL and bearer token) and to tell a live job from a dead one.

Invariant: an entry is listed only while the process that wrote it runs (same pid and same
process start time, so a reused pid does not revive it); entries of ended or killed drivers
are deleted when found. Entry files are 0600 and written atomically (never half-read), and
the directory is used only if the current user owns it and nobody else may write in it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass

import psutil

from cairn.common.exceptions import ConfigurationError
from cairn.ids import JobId

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
_SUFFIX = ".json"
# Two start times of one process read apart may differ by rounding; a new process differs more.
_START_TOLERANCE_S = 1.0


@dataclass(frozen=True)
class JobEntry:
    """One running job as the registry lists it (``token`` is None when the endpoint does
    not require one: ``cairn.rest.token.enabled: false``)."""

    job_id: JobId
    name: str
    endpoint: str  # e.g. http://127.0.0.1:40123
    start_time_ms: int
    pid: int
    process_start: float  # psutil's create_time() of ``pid``: tells a reused pid apart
    token: str | None = None
    truststore: str | None = None  # an https endpoint's CA file (security.ssl.rest.truststore)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobEntry:
        """Parse an entry file.

        >>> e = JobEntry("j1", "job", "http://127.0.0.1:1", 5, 42, 1.5, "t")
        >>> JobEntry.from_json(e.to_json()) == e
        True
        """
        data = json.loads(text)
        return cls(
            job_id=JobId(str(data["job_id"])),
            name=str(data["name"]),
            endpoint=str(data["endpoint"]),
            start_time_ms=int(data["start_time_ms"]),
            pid=int(data["pid"]),
            process_start=float(data["process_start"]),
            token=None if data.get("token") is None else str(data["token"]),
            truststore=None if data.get("truststore") is None else str(data["truststore"]),
        )


def is_stale(entry: JobEntry, process_start: float | None) -> bool:
    """Whether ``entry``'s driver is gone: no process with its pid (``process_start`` is
    None), or another one that started at another time (the pid was reused).

    >>> e = JobEntry("j", "n", "http://h:1", 0, 42, 1000.0)
    >>> is_stale(e, None), is_stale(e, 1000.3), is_stale(e, 2000.0)
    (True, False, True)
    """
    if process_start is None:
        return True
    return abs(process_start - entry.process_start) > _START_TOLERANCE_S


def default_registry_dir() -> str:
    """``<tempdir>/cairn-jobs-<uid>``: one registry per user, beside the default checkpoint
    root (the CLI and the jobs it controls must agree on it: same user, same ``TMPDIR``)."""
    return os.path.join(tempfile.gettempdir(), f"cairn-jobs-{os.getuid()}")


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is none."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:  # another user's process: alive, but not ours to read
        return None


class JobRegistry:
    """The registry directory ``directory`` (default: :func:`default_registry_dir`).

    >>> import tempfile, os
    >>> reg = JobRegistry(os.path.join(tempfile.mkdtemp(), "jobs"))
    >>> me = JobEntry("j1", "sums", "http://127.0.0.1:1", 0, os.getpid(),
    ...               process_start_time(os.getpid()) or 0.0, "secret")
    >>> reg.register(me)
    >>> [e.job_id for e in reg.running_jobs()]
    ['j1']
    >>> reg.unregister("j1")
    >>> reg.running_jobs()
    []
    """

    def __init__(
        self,
        directory: str | None = None,
        process_start: Callable[[int], float | None] = process_start_time,
    ) -> None:
        self.directory = directory or default_registry_dir()
        self._process_start = process_start

    def _path(self, job_id: JobId) -> str:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id!r}")
        return os.path.join(self.directory, job_id + _SUFFIX)

    def register(self, entry: JobEntry) -> None:
        """Add (or replace) ``entry``: written to a private temporary file, then renamed."""
        self.ensure_private_dir()
        final = self._path(entry.job_id)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(entry.to_json())
            os.replace(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def unregister(self, job_id: JobId) -> None:
        """Remove the job's entry (a missing one is fine)."""
        try:
            os.unlink(self._path(job_id))
        except FileNotFoundError:
            pass

    def running_jobs(self) -> list[JobEntry]:
        """Entries whose driver still runs, oldest first; stale and unreadable entries are
        deleted (logged)."""
        if not os.path.isdir(self.directory):
            return []
        self._check_private_dir()
        entries = []
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            path = os.path.join(self.directory, name)
            try:
                with open(path, encoding="utf-8") as f:
                    entry = JobEntry.from_json(f.read())
            except FileNotFoundError:
                continue  # unregistered meanwhile
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("removing unreadable job registry entry %s: %s", path, e)
                self._remove(path)
                continue
            if is_stale(entry, self._process_start(entry.pid)):
                log.info(
                    "removing the registry entry of job %s: its driver (pid %d) is gone",
                    entry.job_id,
                    entry.pid,
                )
                self._remove(path)
                continue
            entries.append(entry)
        return sorted(entries, key=lambda e: (e.start_time_ms, e.job_id))

    def find(self, job_id: JobId) -> JobEntry | None:
        """The running job ``job_id``, or None."""
        for entry in self.running_jobs():
            if entry.job_id == job_id:
                return entry
        return None

    @staticmethod
    def _remove(path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def ensure_private_dir(self) -> None:
        """Create the directory 0700, or check that the existing one is private.

        Raises:
            ConfigurationError: not a directory, another user's, or open to others.
        """
        try:
            os.makedirs(os.path.dirname(self.directory) or ".", exist_ok=True)
            os.mkdir(self.directory, DIR_MODE)
            os.chmod(self.directory, DIR_MODE)
        except FileExistsError:
            pass
        self._check_private_dir()

    def _check_private_dir(self) -> None:
        st = os.lstat(self.directory)
        where = f"job registry {self.directory}"
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigurationError(f"{where} is not a directory; remove it")
        if st.st_uid != os.getuid():
            raise ConfigurationError(
                f"{where} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}): it "
                "could point your CLI at someone else's endpoints; remove it"
            )
        if st.st_mode & 0o077:
            raise ConfigurationError(
                f"{where} is accessible to group or others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}): it holds the jobs' tokens; chmod 700 it"
            )
