"""Where checkpoints are written (``pyflink.datastream.checkpoint_storage``).

Invariant: a storage object is only a way to set ``execution.checkpointing.storage`` and
``execution.checkpointing.dir``; Cairn always writes checkpoint files through fsspec, to the
configured directory or, when none is set, to ``file://<tempdir>/cairn-checkpoints``.

>>> normalize_storage_url("/tmp/ckpt")
'file:///tmp/ckpt'
>>> normalize_storage_url("s3://bucket/ckpt")
's3://bucket/ckpt'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from cairn.common.exceptions import ConfigurationError
from cairn.common.filesystems import filesystem_url_problem

__all__ = [
    "CheckpointStorage",
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
    "normalize_storage_url",
]


def normalize_storage_url(path: str) -> str:
    """A URL for fsspec: URLs are kept, local paths become absolute ``file://`` URLs."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigurationError(
            f"checkpoint storage path must be a non-empty string, got {path!r}"
        )
    path = path.strip()
    if "://" in path:
        problem = filesystem_url_problem(path)
        if problem:
            raise ConfigurationError(f"checkpoint storage: {problem}")
        return path
    if path.startswith("file:"):
        path = path[len("file:") :]
    return "file://" + os.path.abspath(os.path.expanduser(path))


class CheckpointStorage:
    """Base of the checkpoint storages; ``to_configuration`` gives its configuration keys."""

    storage_type = ""

    def __init__(self, checkpoint_path: str | None, storage_options: Mapping[str, Any] | None):
        self._path = normalize_storage_url(checkpoint_path) if checkpoint_path else None
        self._storage_options = dict(storage_options or {})

    def get_checkpoint_path(self) -> str | None:
        return self._path

    def get_storage_options(self) -> dict[str, Any]:
        """fsspec options for the storage file system (e.g. credentials); Cairn extension."""
        return dict(self._storage_options)

    def to_configuration(self) -> dict[str, str]:
        conf = {"execution.checkpointing.storage": self.storage_type}
        if self._path is not None:
            conf["execution.checkpointing.dir"] = self._path
        return conf

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CheckpointStorage)
            and type(other) is type(self)
            and (self._path, self._storage_options) == (other._path, other._storage_options)
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._path))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path!r})"


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink keeps such checkpoints in the JobManager's memory. Cairn writes them to
    ``checkpoint_path`` if given, else to the default local directory of the driver; use a
    ``FileSystemCheckpointStorage`` on a shared file system for multi-host clusters."""

    storage_type = "jobmanager"

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None):
        super().__init__(checkpoint_path, None)
        self._max_state_size = max_state_size

    def get_max_state_size(self) -> int | None:
        """Accepted for compatibility; not enforced."""
        return self._max_state_size


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints as files under ``checkpoint_path`` (``file://``, ``hdfs://``, ``s3://``...
    anything fsspec opens), one ``chk-<id>`` directory per checkpoint.

    ``file_state_size_threshold`` and ``write_buffer_size`` are accepted for PyFlink
    compatibility and ignored; ``storage_options`` (Cairn) are passed to fsspec.
    """

    storage_type = "filesystem"

    def __init__(
        self,
        checkpoint_path: str,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int = -1,
        storage_options: Mapping[str, Any] | None = None,
    ):
        if not checkpoint_path:
            raise ConfigurationError("FileSystemCheckpointStorage needs a checkpoint path")
        super().__init__(checkpoint_path, storage_options)
        self._file_state_size_threshold = file_state_size_threshold
        self._write_buffer_size = write_buffer_size

    def get_min_file_size_threshold(self) -> int | None:
        return self._file_state_size_threshold

    def get_write_buffer_size(self) -> int:
        return self._write_buffer_size
