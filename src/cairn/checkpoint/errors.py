"""Errors of the checkpoint layer.

Invariant: every error names the exact path (file or directory) it is about and the problem
found there, so that a user reading only the message knows what to inspect or delete; and
every error survives a pickle round trip (errors cross process boundaries: a savepoint's
future, a worker's report), keeping its message and attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.ids import CheckpointId


class CheckpointError(Exception):
    """Base class of the checkpoint layer's errors."""


class _PathProblemError(CheckpointError):
    """An error about ``path``, whose message is ``<path>: <problem>``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __str__(self) -> str:  # OSError's default (for the OSError subclasses) adds errno noise
        return f"{self.path}: {self.problem}"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.path, self.problem)


class CorruptCheckpointError(_PathProblemError):
    """A checkpoint's metadata or one of its state files is unreadable, truncated or missing.

    >>> str(CorruptCheckpointError("/c/chk-3/_metadata", "checksum mismatch"))
    '/c/chk-3/_metadata: checksum mismatch'
    """


class UnverifiedCheckpointError(CorruptCheckpointError):
    """A signing key is set, and a checkpoint's metadata is unsigned or its signature does not
    match (another key, or the file was changed): it is not trusted, hence not restored."""


class CheckpointNotFoundError(_PathProblemError, FileNotFoundError):
    """No checkpoint, savepoint or job checkpoint directory exists at ``path``."""


class NoUsableCheckpointError(CheckpointError):
    """Every restore candidate failed verification; ``reasons`` holds (location, problem)."""

    def __init__(self, message: str, reasons: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.reasons = tuple(reasons)

    def __reduce__(self) -> tuple[type, tuple[str, tuple[tuple[str, str], ...]]]:
        return type(self), (str(self), self.reasons)


class FallbackRefusedError(NoUsableCheckpointError):
    """An older checkpoint is usable, but restoring it instead of a newer, unusable one whose
    completion was announced would commit the output in between a second time."""


class CheckpointFailedError(CheckpointError):
    """A checkpoint or savepoint was aborted; raised from a savepoint's future.
    ``checkpoint_id`` is None for a savepoint that failed before it was triggered.

    >>> print(CheckpointFailedError(CheckpointId(3), "CHECKPOINT_EXPIRED", "took too long",
    ...                             "savepoint"))
    savepoint 3 failed: CHECKPOINT_EXPIRED: took too long
    >>> print(CheckpointFailedError(None, "JOB_FAILOVER_REGION", "job restarts", "savepoint"))
    savepoint failed: JOB_FAILOVER_REGION: job restarts
    """

    def __init__(
        self,
        checkpoint_id: CheckpointId | None,
        reason: str,
        message: str,
        kind: str = "checkpoint",
    ) -> None:
        what = kind if checkpoint_id is None else f"{kind} {checkpoint_id}"
        super().__init__(f"{what} failed: {reason}: {message}")
        self.checkpoint_id = checkpoint_id
        self.reason = reason
        self.detail = message
        self.kind = kind

    def __reduce__(self) -> tuple[type, tuple[CheckpointId | None, str, str, str]]:
        return type(self), (self.checkpoint_id, self.reason, self.detail, self.kind)


class SavepointTargetExistsError(_PathProblemError, FileExistsError):
    """A savepoint's target directory is not empty: savepoints never mix with other files.

    >>> print(SavepointTargetExistsError("/sp/one", "already contains a savepoint (_metadata)"))
    /sp/one: already contains a savepoint (_metadata)
    """


class SavepointRejectedError(CheckpointError):
    """A savepoint cannot be taken now: the job is not running, is stopping or finishing,
    or has checkpointing disabled; the message says which."""


class RestoreReadError(CheckpointError):
    """The checkpoint storage failed while the job master chose the checkpoint to restore
    after a failure (e.g. the object store was unreachable): a failed attempt, so the
    restart strategy waits and tries again or ends the job. The cause is chained."""


class CheckpointStorageUnusableError(CheckpointError):
    """The checkpoint storage cannot be used: missing bucket, wrong credentials, unreachable
    endpoint, no permission or no space. Raised at submission, before any worker starts.

    >>> print(CheckpointStorageUnusableError("s3://b/c", "bucket 'b' does not exist"))
    checkpoint storage s3://b/c is not usable: bucket 'b' does not exist
    """

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"checkpoint storage {url} is not usable: {problem}")
        self.url = url
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.url, self.problem)
