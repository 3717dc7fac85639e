"""The job archive: when a job ends, its driver writes the job's final REST views to
``<jobmanager.archive.fs.dir>/<job id>.<start ms>.json`` (Flink's archive layout: ``{"archive":
[{"path": "/jobs/overview", "json": "..."}, ...]}``), so that every endpoint and ``cairn list
--all`` list finished jobs of any driver, also after that driver exited (Flink's HistoryServer).
A job keeps its id across runs (resume on rerun, high availability), so each run has its own
archive, named by the run's start: a rerun never overwrites its predecessor's history, and
``/jobs/:jobid`` of an ended job serves its latest run. (``<job id>.json``, the name before,
is still read.)

Invariant: an archive holds only bounded views of one ended run (its overview row, its final
``/jobs/:jobid`` body, its final ``/jobs/:jobid/checkpoints`` body with Flink's bounded
history and ``/jobs/:jobid/exceptions`` with at most 32 restarts' messages), never state. It
is written whole or not at all (local: a private temporary file renamed, 0600 in a 0700
directory; other filesystems: one fsspec put) and the writer keeps the newest
``historyserver.archive.retained-jobs`` archives (-1: all). Reading never fails on a bad file:
an unreadable archive is skipped with a warning naming it (once per file version).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint import locations
from cairn.ids import JobId

log = logging.getLogger(__name__)

__all__ = ["ArchivedJob", "JobArchive", "decode", "default_archive_dir", "encode"]

DEFAULT_RETAINED = 100
SUFFIX = ".json"
OVERVIEW = "/jobs/overview"
TTL_S = 2.0  # the directory is listed at most this often for readers
_JOB_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
_FILE = re.compile(r"^([0-9A-Za-z_-]{1,64})(?:\.(\d{1,20}))?\.json$")  # <job id>[.<start ms>]


def default_archive_dir(registry_dir: str) -> str:
    """``<registry>/archive``: private like the job registry, shared by the user's drivers.

    >>> default_archive_dir("/tmp/cairn-jobs-1000")
    '/tmp/cairn-jobs-1000/archive'
    """
    return os.path.join(registry_dir, "archive")


def is_job_id(text: str) -> bool:
    """Whether ``text`` may name an archive (no path separators, dots or empty names).

    >>> is_job_id("0123abcd"), is_job_id("../x"), is_job_id("overview.json")
    (True, False, False)
    """
    return bool(_JOB_ID.match(text))


@dataclass(frozen=True)
class ArchivedJob:
    """The final REST bodies of one ended job, by path (``/jobs/overview`` holds its row).

    >>> row = {"jid": "j1", "state": "FAILED", "end-time": 9}
    >>> job = ArchivedJob.of(row, {"jid": "j1"}, {"exceptions": {"root-exception": "E: x"}})
    >>> job.state, job.end_ms, job.body("/jobs/j1"), job.body("/jobs/j1/checkpoints")
    ('FAILED', 9, {'jid': 'j1'}, None)
    >>> job.body("/jobs/j1/exceptions")
    {'root-exception': 'E: x'}
    """

    job_id: JobId
    views: Mapping[str, Any]

    @classmethod
    def of(
        cls, row: dict[str, Any], details: dict[str, Any], more: Mapping[str, Any] | None = None
    ) -> ArchivedJob:
        """The archive of the job of overview ``row``: ``details`` (``/jobs/:jobid``) and
        ``more`` bodies by their path under it (``checkpoints``, ``exceptions``)."""
        jid = JobId(str(row["jid"]))
        views: dict[str, Any] = {OVERVIEW: {"jobs": [row]}, f"/jobs/{jid}": details}
        views.update({f"/jobs/{jid}/{sub}": body for sub, body in (more or {}).items()})
        return cls(jid, views)

    @property
    def row(self) -> dict[str, Any]:
        """The job's ``/jobs/overview`` row."""
        return dict(self.views[OVERVIEW]["jobs"][0])

    @property
    def state(self) -> str:
        return str(self.row["state"])

    @property
    def end_ms(self) -> int:
        return int(self.row["end-time"])

    @property
    def file_name(self) -> str:
        """``<job id>.<start ms>.json``: one file per run of the job.

        >>> ArchivedJob.of({"jid": "j1", "state": "FAILED", "start-time": 7}, {}).file_name
        'j1.7.json'
        """
        return f"{self.job_id}.{int(self.row.get('start-time', 0))}{SUFFIX}"

    def body(self, path: str) -> Any | None:
        """The archived body of REST ``path``, or None."""
        return self.views.get(path)


def encode(job: ArchivedJob) -> bytes:
    """Flink's archive layout (each body a JSON string under its path).

    >>> data = encode(ArchivedJob.of({"jid": "j1", "state": "FINISHED", "end-time": 5}, {}))
    >>> decode("j1", data).state
    'FINISHED'
    """
    entries = [{"path": p, "json": json.dumps(body)} for p, body in job.views.items()]
    return json.dumps({"archive": entries}).encode()


def decode(job_id: JobId, data: bytes) -> ArchivedJob:
    """Parse an archive file of job ``job_id``.

    Raises:
        ValueError: not an archive of that job (the reason).

    >>> decode("j1", b'{"archive": []}')
    Traceback (most recent call last):
    ...
    ValueError: no /jobs/overview row of job j1
    """
    try:
        entries = json.loads(data)["archive"]
        views = {str(e["path"]): json.loads(e["json"]) for e in entries}
    except (KeyError, TypeError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError too
        raise ValueError(f"not a job archive ({type(e).__name__}: {e})") from None
    try:
        job = ArchivedJob(job_id, views)
        if job.row["jid"] != job_id:
            raise ValueError(f"its row is of job {job.row['jid']}, not {job_id}")
        job.state, job.end_ms  # noqa: B018 (checks both parse)
    except (KeyError, IndexError, TypeError) as e:
        raise ValueError(f"no {OVERVIEW} row of job {job_id}") from e
    if not isinstance(views.get(f"/jobs/{job_id}"), dict):
        raise ValueError(f"no /jobs/{job_id} body")
    return job


class JobArchive:
    """The archive directory ``directory`` (a local path or an fsspec URL); safe from any
    thread. Readers see new archives within ``ttl_s``, or at once through :meth:`get`.

    >>> import tempfile
    >>> archive = JobArchive(tempfile.mkdtemp() + "/archive", retained=2)
    >>> for i, jid in enumerate(["old", "j", "j"]):  # two runs of job j
    ...     row = {"jid": jid, "state": "FINISHED", "start-time": i, "end-time": i + 1}
    ...     archive.write(ArchivedJob.of(row, {}))
    >>> [(job.job_id, job.end_ms) for job in archive.jobs()], archive.get("old")
    ([('j', 3), ('j', 2)], None)
    >>> archive.get("j").end_ms  # the latest run
    3
    """

    def __init__(
        self,
        directory: str,
        retained: int = DEFAULT_RETAINED,
        storage_options: Mapping[str, Any] | None = None,
        ttl_s: float = TTL_S,
    ) -> None:
        if retained == 0 or retained < -1:
            raise ValueError(f"historyserver.archive.retained-jobs must be -1 or >= 1: {retained}")
        self.directory = directory
        self._retained = retained
        self._storage_options = dict(storage_options or {})
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._loc: locations.Location | None = None
        # file name -> (size, archive or None when unreadable): archives never change.
        self._files: dict[str, tuple[int, ArchivedJob | None]] = {}
        self._at = float("-inf")

    def _location(self) -> locations.Location:
        if self._loc is None:
            self._loc = locations.resolve(self.directory, self._storage_options)
        return self._loc

    def _path(self, name: str) -> str:
        return posixpath.join(self._location().path, name)

    # ------------------------------------------------------------------ writing

    def write(self, job: ArchivedJob) -> None:
        """Write ``job``'s archive whole, then remove the oldest beyond the retention.

        Raises:
            OSError, ValueError: the archive could not be written (nothing partial is left).
        """
        if not is_job_id(job.job_id):
            raise ValueError(f"not a job id: {job.job_id!r}")
        loc = self._location()
        target = locations.Location(loc.fs, self._path(job.file_name), loc.as_url)
        locations.makedirs(loc)
        locations.atomic_write(target, encode(job))
        with self._lock:
            self._files[target.name] = (-1, job)  # no read back; the next scan sizes it
            self._scan()
            if self._retained > 0:
                self._prune()

    def archive(self, job: ArchivedJob) -> bool:
        """:meth:`write`, a failure logged as a warning (the job's outcome never depends on
        its archive); returns whether the archive was written."""
        try:
            self.write(job)
            return True
        except Exception as e:
            log.warning("job %s: could not archive it in %s: %s", job.job_id, self.directory, e)
            return False

    def _prune(self) -> None:
        for name, _ in self._named()[self._retained :]:
            try:
                loc = self._location()
                loc.fs.rm_file(posixpath.join(loc.path, name))
            except FileNotFoundError:
                pass  # another driver pruned it first
            except OSError as e:
                log.warning("could not remove the old job archive %s: %s", name, e)
                continue
            self._files.pop(name, None)

    # ------------------------------------------------------------------ reading

    def jobs(self) -> list[ArchivedJob]:
        """The readable archives, newest end first."""
        with self._lock:
            if time.monotonic() - self._at >= self._ttl_s:
                self._scan()
            return self._valid()

    def get(self, job_id: JobId) -> ArchivedJob | None:
        """The archive of ``job_id``'s latest run (the directory listed now if this reader
        knows none yet), or None."""
        if not is_job_id(job_id):
            return None
        with self._lock:
            runs = [job for _, job in self._named() if job.job_id == job_id]
            if not runs:
                self._scan()
                runs = [job for _, job in self._named() if job.job_id == job_id]
            return runs[0] if runs else None

    def _named(self) -> list[tuple[str, ArchivedJob]]:
        """(file name, archive) of the readable archives, newest end first."""
        named = [(name, job) for name, (_, job) in self._files.items() if job is not None]
        return sorted(named, key=lambda n: (n[1].end_ms, n[1].job_id, n[0]), reverse=True)

    def _valid(self) -> list[ArchivedJob]:
        return [job for _, job in self._named()]

    def _scan(self) -> None:
        """Refresh the cache from the directory: read new (or resized) files, forget gone."""
        loc = self._location()
        self._at = time.monotonic()
        try:
            loc.fs.invalidate_cache(loc.path)
            listed = loc.fs.ls(loc.path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            self._files.clear()
            return
        except OSError as e:
            log.warning("could not list the job archive %s: %s", self.directory, e)
            return
        seen: dict[str, tuple[int, ArchivedJob | None]] = {}
        for info in listed:
            name = posixpath.basename(str(info["name"]).rstrip("/"))
            size = int(info.get("size") or 0)
            if info.get("type") != "file" or not _FILE.match(name):
                continue
            known = self._files.get(name)
            if known is not None and known[0] in (size, -1) and known[1] is not None:
                seen[name] = (size, known[1])
            elif known is not None and known[0] == size:
                seen[name] = known  # unreadable, already warned about
            else:
                seen[name] = (size, self._read(name, str(info["name"])))
        self._files = seen

    def _read(self, name: str, path: str) -> ArchivedJob | None:
        try:
            data = self._location().fs.cat_file(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("skipping the job archive %s: %s", self._public(name), e)
            return None
        return self._parse(name, data)

    def _parse(self, name: str, data: bytes) -> ArchivedJob | None:
        match = _FILE.match(name)
        if match is None:
            return None
        try:
            return decode(JobId(match.group(1)), data)
        except ValueError as e:
            log.warning("skipping the unreadable job archive %s: %s", self._public(name), e)
            return None

    def _public(self, name: str) -> str:
        return posixpath.join(self.directory, name)
