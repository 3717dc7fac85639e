"""A job's identity across runs, the job id derived from it, and the run-status record.

Invariant: the same identity always yields the same job id, so every run of a job writes
into the same ``<storage>/<job-id>/`` and continues its checkpoint numbering there; the
run-status record (``<storage>/<job-id>/_run-status``) is the one place that says how the
latest run of an identity went, and decoding it never runs code (JSON, checked field by
field). Everything here is pure; reading and writing the record is ``run_status.py``'s.

The identity is ``high-availability.cluster-id`` when it is set (Flink's key: operators name
the job explicitly, and then the storage URL does not matter), else the job's name
(``pipeline.name`` or the name given to ``execute``) together with the checkpoint storage
URL: the same job started again against the same storage is the same job.

>>> a = identity_of(None, "orders", "s3://bucket/checkpoints")
>>> a.job_id == identity_of(None, "orders", "s3://bucket/checkpoints/").job_id
True
>>> a.job_id == identity_of(None, "orders", "s3://bucket/other").job_id
False
>>> identity_of("prod-orders", "orders", "file:///a").job_id == identity_of(
...     "prod-orders", "renamed", "s3://b").job_id
True
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from cairn.ids import CheckpointId, JobId

__all__ = [
    "RUN_STATUS_FILE",
    "JobIdentity",
    "RunState",
    "RunStatus",
    "identity_of",
]

# Beside the chk-<n> directories; an underscore name, like _metadata, is never a checkpoint.
RUN_STATUS_FILE = "_run-status"
_RECORD_VERSION = 1


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """What makes two runs the same job: ``cluster_id``, else ``job_name`` at ``storage_url``."""

    job_name: str
    storage_url: str
    cluster_id: str | None = None

    @property
    def job_id(self) -> JobId:
        """32 hex digits (the shape of Flink's job ids), a digest of the identity."""
        digest = hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()
        return JobId(digest[:32])

    def canonical(self) -> str:
        """The text the job id is derived from.

        >>> identity_of(None, "orders", "file:///tmp/cp/").canonical()
        'pipeline.name=orders\\nstorage=file:///tmp/cp'
        """
        if self.cluster_id is not None:
            return f"high-availability.cluster-id={self.cluster_id}"
        return f"pipeline.name={self.job_name}\nstorage={self.storage_url}"

    def describe(self) -> str:
        """How a log line or an error names the identity.

        >>> identity_of(None, "orders", "file:///tmp/cp").describe()
        "pipeline.name 'orders' on file:///tmp/cp"
        """
        if self.cluster_id is not None:
            return f"high-availability.cluster-id {self.cluster_id!r}"
        return f"pipeline.name {self.job_name!r} on {self.storage_url}"


def identity_of(cluster_id: str | None, job_name: str, storage_url: str) -> JobIdentity:
    """The identity of a job named ``job_name`` checkpointing to ``storage_url``; a trailing
    ``/`` of the URL does not make another job."""
    return JobIdentity(job_name, storage_url.rstrip("/") or storage_url, cluster_id or None)


class RunState(enum.Enum):
    """How a run of a job ended; RUNNING: it has not said (still running, or its driver
    was lost)."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def ended_on_purpose(self) -> bool:
        """FINISHED or CANCELED: there is nothing to resume unless someone asks for it."""
        return self in (RunState.FINISHED, RunState.CANCELED)


@dataclass(frozen=True, slots=True)
class RunStatus:
    """The run-status record of one run, written when it starts and again when it ends.

    ``first_checkpoint_id``: the lowest checkpoint id that belongs to this run's history
    (its restore point, else the first id it numbers); older checkpoints in the job
    directory are an earlier run's and are never resumed from on its behalf.
    ``restored_from``: the checkpoint or savepoint the run started from (None: fresh).
    ``host``, ``pid`` and ``pid_started`` (the process's start time, seconds since the
    epoch) name the driver, so a rerun can tell a lost driver from one still running.
    ``attempt``: the latest attempt number it deployed; the next run numbers its attempts
    above it, so what a sink names after its attempt (in-progress files, prepared
    transactions) never collides with the lost run's and is cleaned up as an earlier one's.

    >>> r = RunStatus("j", "run-1", RunState.RUNNING, CheckpointId(1), None, "h", 7, 1.5, 10)
    >>> RunStatus.decode(r.encode()) == r
    True
    >>> RunStatus.decode(r.ended(RunState.FINISHED, 20).encode()).state
    <RunState.FINISHED: 'FINISHED'>
    """

    job_id: JobId
    run_id: str
    state: RunState
    first_checkpoint_id: CheckpointId
    restored_from: str | None
    host: str
    pid: int
    pid_started: float
    started_ms: int
    ended_ms: int | None = None
    identity: str = ""
    attempt: int = 0  # the latest attempt the run deployed (the next run numbers above it)

    def at_attempt(self, attempt: int) -> RunStatus:
        """The record of the same run once it deployed ``attempt``."""
        return replace(self, attempt=max(self.attempt, attempt))

    def ended(self, state: RunState, now_ms: int) -> RunStatus:
        """The record of the same run after it ended with ``state``."""
        return replace(self, state=state, ended_ms=now_ms)

    def encode(self) -> bytes:
        fields = asdict(self)
        fields["state"] = self.state.value
        fields["version"] = _RECORD_VERSION
        return json.dumps(fields, sort_keys=True, indent=1).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> RunStatus:
        """The record in ``data``.

        Raises:
            ValueError: not a run-status record of a version this code reads; says why.
        """
        try:
            raw: Any = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"not JSON: {e}") from None
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        if raw.get("version") != _RECORD_VERSION:
            raise ValueError(f"unknown record version {raw.get('version')!r}")
        try:
            restored = raw["restored_from"]
            ended = raw["ended_ms"]
            return cls(
                job_id=JobId(_typed(raw, "job_id", str)),
                run_id=_typed(raw, "run_id", str),
                state=RunState(raw["state"]),
                first_checkpoint_id=CheckpointId(_typed(raw, "first_checkpoint_id", int)),
                restored_from=None if restored is None else _typed(raw, "restored_from", str),
                host=_typed(raw, "host", str),
                pid=_typed(raw, "pid", int),
                pid_started=float(_typed(raw, "pid_started", (int, float))),
                started_ms=_typed(raw, "started_ms", int),
                ended_ms=None if ended is None else _typed(raw, "ended_ms", int),
                identity=_typed(raw, "identity", str),
                attempt=_typed(raw, "attempt", int),
            )
        except KeyError as e:
            raise ValueError(f"field {e.args[0]!r} missing") from None
        except ValueError as e:  # RunState of an unknown name
            raise ValueError(str(e)) from None


def _typed(raw: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = raw[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} has the wrong type: {value!r}")
    return value
