"""``CheckpointConfig`` (``env.get_checkpoint_config()``) and its translation into
``CheckpointSettings``.

Invariant: the config object is a view of the environment's configuration (the
``execution.checkpointing.*`` keys); every setter validates with Flink's rules at once (interval
and timeout >= 10 ms, min pause >= 0, max concurrent >= 1, tolerable failures >= 0, retained
>= 1) and ``checkpoint_settings_from`` is the only place that builds ``CheckpointSettings``.

>>> from cairn.common.configuration import Configuration
>>> config = CheckpointConfig(Configuration())
>>> config.set_checkpoint_interval(60_000).set_min_pause_between_checkpoints(30_000)
CheckpointConfig(...)
>>> config.to_settings().interval_ms
60000
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from cairn.common import config_options as opts
from cairn.common.checkpointing_mode import CheckpointingMode
from cairn.common.configuration import Configuration
from cairn.common.exceptions import ConfigurationError
from cairn.common.externalized_checkpoint_retention import ExternalizedCheckpointRetention
from cairn.common.storage_options import merge_storage_options, storage_options_for
from cairn.common.time import Duration
from cairn.datastream.checkpoint_storage import (
    CheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    normalize_storage_url,
)
from cairn.settings import CheckpointSettings, RetentionPolicy, SigningKey

__all__ = ["CheckpointConfig", "checkpoint_settings_from"]

Millis = int | datetime.timedelta | Duration


class CheckpointConfig:
    """Checkpointing settings of one environment (PyFlink's ``CheckpointConfig``).

    Times are milliseconds unless a ``Duration``/``timedelta`` is given. Setters return the
    config, so calls can be chained.
    """

    DEFAULT_MODE = CheckpointingMode.EXACTLY_ONCE
    DEFAULT_TIMEOUT = 10 * 60 * 1000
    DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS = 0
    DEFAULT_MAX_CONCURRENT_CHECKPOINTS = 1

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._conf = configuration if configuration is not None else Configuration()
        self._storage_options: dict[str, Any] = {}

    # -- plumbing ----------------------------------------------------------------------------

    def _set(self, option: opts.ConfigOption, value: Any) -> CheckpointConfig:
        key, text = opts.format_value(option.key, value)
        self._conf.set_string(key, text)
        return self

    def _get(self, option: opts.ConfigOption) -> Any:
        for key in (option.key, *option.deprecated_keys):
            raw = self._conf.get_string(key, None)
            if raw is not None:
                return opts.parse_value(key, raw)[1]
        return option.default

    def _unset(self, option: opts.ConfigOption) -> None:
        for key in (option.key, *option.deprecated_keys):
            self._conf.remove_config(key)

    # -- interval and mode -------------------------------------------------------------------

    def is_checkpointing_enabled(self) -> bool:
        return self._get(opts.CHECKPOINTING_INTERVAL) is not None

    def get_checkpoint_interval(self) -> int:
        """Milliseconds between checkpoints; -1 when checkpointing is disabled."""
        interval = self._get(opts.CHECKPOINTING_INTERVAL)
        return -1 if interval is None else int(interval)

    def set_checkpoint_interval(self, checkpoint_interval: Millis) -> CheckpointConfig:
        """Enable periodic checkpoints every ``checkpoint_interval`` (at least 10 ms)."""
        return self._set(opts.CHECKPOINTING_INTERVAL, checkpoint_interval)

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode[self._get(opts.CHECKPOINTING_MODE)]

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> CheckpointConfig:
        """EXACTLY_ONCE (aligned barriers, the default) or AT_LEAST_ONCE (no alignment)."""
        if not isinstance(checkpointing_mode, CheckpointingMode):
            raise TypeError(f"expected a CheckpointingMode, got {checkpointing_mode!r}")
        return self._set(opts.CHECKPOINTING_MODE, checkpointing_mode)

    # -- pacing ------------------------------------------------------------------------------

    def get_checkpoint_timeout(self) -> int:
        return int(self._get(opts.CHECKPOINTING_TIMEOUT))

    def set_checkpoint_timeout(self, checkpoint_timeout: Millis) -> CheckpointConfig:
        """Abort a checkpoint that is not complete after this long (at least 10 ms)."""
        return self._set(opts.CHECKPOINTING_TIMEOUT, checkpoint_timeout)

    def get_min_pause_between_checkpoints(self) -> int:
        return int(self._get(opts.CHECKPOINTING_MIN_PAUSE))

    def set_min_pause_between_checkpoints(
        self, min_pause_between_checkpoints: Millis
    ) -> CheckpointConfig:
        """Leave at least this long between the end of one checkpoint and the next start."""
        return self._set(opts.CHECKPOINTING_MIN_PAUSE, min_pause_between_checkpoints)

    def get_max_concurrent_checkpoints(self) -> int:
        return int(self._get(opts.CHECKPOINTING_MAX_CONCURRENT))

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        return self._set(opts.CHECKPOINTING_MAX_CONCURRENT, max_concurrent_checkpoints)

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return int(self._get(opts.CHECKPOINTING_TOLERABLE_FAILURES))

    def set_tolerable_checkpoint_failure_number(
        self, tolerable_checkpoint_failure_number: int
    ) -> CheckpointConfig:
        """Consecutive checkpoint failures tolerated before the job fails over (default 0)."""
        return self._set(opts.CHECKPOINTING_TOLERABLE_FAILURES, tolerable_checkpoint_failure_number)

    def is_fail_on_checkpointing_errors(self) -> bool:
        """Deprecated: ``get_tolerable_checkpoint_failure_number() == 0``."""
        return self.get_tolerable_checkpoint_failure_number() == 0

    def set_fail_on_checkpointing_errors(
        self, fail_on_checkpointing_errors: bool
    ) -> CheckpointConfig:
        """Deprecated: use ``set_tolerable_checkpoint_failure_number``."""
        return self.set_tolerable_checkpoint_failure_number(
            0 if fail_on_checkpointing_errors else 2**31 - 1
        )

    def get_number_of_retained_checkpoints(self) -> int:
        return int(self._get(opts.CHECKPOINTING_NUM_RETAINED))

    def set_number_of_retained_checkpoints(self, num_retained: int) -> CheckpointConfig:
        """Keep the last ``num_retained`` completed checkpoints (Cairn extension; the key is
        ``execution.checkpointing.num-retained``)."""
        return self._set(opts.CHECKPOINTING_NUM_RETAINED, num_retained)

    # -- retention ---------------------------------------------------------------------------

    def set_externalized_checkpoint_retention(
        self, retention_mode: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """Keep or delete retained checkpoints when the job is cancelled."""
        if not isinstance(retention_mode, ExternalizedCheckpointRetention):
            raise TypeError(f"expected an ExternalizedCheckpointRetention, got {retention_mode!r}")
        return self._set(opts.CHECKPOINTING_RETENTION, retention_mode)

    def enable_externalized_checkpoints(
        self, cleanup_mode: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """PyFlink 1.x name of ``set_externalized_checkpoint_retention``."""
        return self.set_externalized_checkpoint_retention(cleanup_mode)

    set_externalized_checkpoint_cleanup = enable_externalized_checkpoints

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return ExternalizedCheckpointRetention[self._get(opts.CHECKPOINTING_RETENTION)]

    get_externalized_checkpoint_cleanup = get_externalized_checkpoint_retention

    def is_externalized_checkpoints_enabled(self) -> bool:
        retention = self.get_externalized_checkpoint_retention()
        return retention is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    # -- storage -----------------------------------------------------------------------------

    def set_checkpoint_storage(self, storage: CheckpointStorage | str) -> CheckpointConfig:
        """A ``CheckpointStorage`` or a URL/path (``"file:///tmp/ckpt"``, ``"s3://b/ckpt"``)."""
        if isinstance(storage, str):
            storage = FileSystemCheckpointStorage(storage)
        if not isinstance(storage, CheckpointStorage):
            raise TypeError(f"expected a CheckpointStorage or a path, got {storage!r}")
        self._unset(opts.CHECKPOINTING_DIR)
        for key, value in storage.to_configuration().items():
            self._conf.set_string(*opts.format_value(key, value))
        self._storage_options = storage.get_storage_options()
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        return self.set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))

    def get_storage_options(self) -> dict[str, Any]:
        """The fsspec storage options of the checkpoint storage (Cairn extension)."""
        return dict(self._storage_options)

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        """The configured storage, or ``None`` (the default local directory)."""
        kind, path = self._get(opts.CHECKPOINTING_STORAGE), self._get(opts.CHECKPOINTING_DIR)
        if kind == "jobmanager":
            return JobManagerCheckpointStorage(path)
        if path is None:
            return None
        return FileSystemCheckpointStorage(path, storage_options=self._storage_options)

    # -- unaligned ---------------------------------------------------------------------------

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        """Barriers overtake buffered records, which become part of the checkpoint
        (EXACTLY_ONCE only; checked at submission)."""
        return self._set(opts.CHECKPOINTING_UNALIGNED, enabled)

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self.enable_unaligned_checkpoints(False)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return bool(self._get(opts.CHECKPOINTING_UNALIGNED))

    def set_aligned_checkpoint_timeout(self, alignment_timeout: Millis) -> CheckpointConfig:
        """With unaligned checkpoints: start aligned and switch to unaligned once alignment
        takes longer than this; 0 (the default) starts unaligned right away."""
        return self._set(opts.CHECKPOINTING_ALIGNED_TIMEOUT, alignment_timeout)

    def get_aligned_checkpoint_timeout(self) -> Duration:
        return Duration.of_millis(int(self._get(opts.CHECKPOINTING_ALIGNED_TIMEOUT)))

    set_alignment_timeout = set_aligned_checkpoint_timeout
    get_alignment_timeout = get_aligned_checkpoint_timeout

    # -- translation -------------------------------------------------------------------------

    def to_settings(self) -> CheckpointSettings:
        """The validated settings of this config alone (no environment or CLI defaults)."""
        resolved = opts.validate_configuration(self._conf.to_dict())
        return checkpoint_settings_from(resolved, self._storage_options)

    def __repr__(self) -> str:
        return "CheckpointConfig(...)"


def checkpoint_settings_from(
    resolved: Mapping[str, Any], storage_options: Mapping[str, Any] | None = None
) -> CheckpointSettings:
    """``CheckpointSettings`` from parsed configuration (canonical key -> value)."""

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    interval = get(opts.CHECKPOINTING_INTERVAL)
    mode = CheckpointingMode[get(opts.CHECKPOINTING_MODE)]
    unaligned = bool(get(opts.CHECKPOINTING_UNALIGNED))
    if interval is not None and unaligned and mode is not CheckpointingMode.EXACTLY_ONCE:
        raise ConfigurationError(
            "unaligned checkpoints require CheckpointingMode.EXACTLY_ONCE, but the mode is "
            f"{mode.name}; disable unaligned checkpoints ({opts.CHECKPOINTING_UNALIGNED.key}) "
            "or use exactly-once"
        )
    if interval is not None and unaligned and get(opts.CHECKPOINTING_MAX_CONCURRENT) > 1:
        raise ConfigurationError(
            "unaligned checkpoints support one concurrent checkpoint only, but "
            f"{opts.CHECKPOINTING_MAX_CONCURRENT.key} is "
            f"{get(opts.CHECKPOINTING_MAX_CONCURRENT)}; set it to 1 (as in Flink)"
        )
    directory = get(opts.CHECKPOINTING_DIR)
    savepoint_dir = get(opts.SAVEPOINT_DIR)
    storage_url = normalize_storage_url(directory) if directory else None
    derived = storage_options_for(storage_url or "", resolved)
    key = get(opts.CHECKPOINT_SIGNING_KEY)
    return CheckpointSettings(
        interval_ms=-1 if interval is None else int(interval),
        mode=mode.to_alignment_mode(),
        timeout_ms=get(opts.CHECKPOINTING_TIMEOUT),
        min_pause_ms=get(opts.CHECKPOINTING_MIN_PAUSE),
        max_concurrent=get(opts.CHECKPOINTING_MAX_CONCURRENT),
        tolerable_failures=get(opts.CHECKPOINTING_TOLERABLE_FAILURES),
        retained=get(opts.CHECKPOINTING_NUM_RETAINED),
        retention=RetentionPolicy[get(opts.CHECKPOINTING_RETENTION)],
        storage_url=storage_url,
        storage_options=merge_storage_options(derived, storage_options or {}),
        unaligned=unaligned,
        aligned_timeout_ms=get(opts.CHECKPOINTING_ALIGNED_TIMEOUT),
        signing_key=None if key is None else SigningKey.parse(key),
        savepoint_dir=normalize_storage_url(savepoint_dir) if savepoint_dir else None,
    )
