"""Validated, immutable job settings handed from the API to the job master and workers.

Invariant: the API validates user input and builds these; everything below the API reads
only these values (never a mutable config object), so a running job cannot be reconfigured
by accident and workers receive exactly what the driver validated.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.events import AlignmentMode

DEFAULT_MAX_PARALLELISM = 128


class RetentionPolicy(enum.Enum):
    """What happens to retained checkpoints when the job is cancelled (Flink names)."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"


@dataclass(frozen=True)
class CheckpointSettings:
    interval_ms: int = -1  # <= 0: periodic checkpoints disabled
    mode: AlignmentMode = AlignmentMode.ALIGNED  # ALIGNED (exactly-once) or AT_LEAST_ONCE
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    retained: int = 1
    retention: RetentionPolicy = RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS
    storage_url: str | None = None  # None: file://<tempdir>/cairn-checkpoints
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    unaligned: bool = False
    aligned_timeout_ms: int = 0

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0


class RestartKind(enum.Enum):
    NONE = "none"
    FIXED_DELAY = "fixed-delay"
    EXPONENTIAL_DELAY = "exponential-delay"
    FAILURE_RATE = "failure-rate"


@dataclass(frozen=True)
class RestartSettings:
    kind: RestartKind = RestartKind.NONE
    attempts: int = 1  # fixed-delay: restarts allowed; exponential: attempts before reset
    delay_ms: int = 1_000  # fixed-delay delay; exponential initial backoff
    max_backoff_ms: int = 60_000
    multiplier: float = 1.5
    reset_threshold_ms: int = 3_600_000
    jitter: float = 0.1
    max_failures_per_interval: int = 1  # failure-rate
    failure_rate_interval_ms: int = 60_000  # failure-rate


@dataclass(frozen=True)
class NetworkSettings:
    """Network buffers: records per buffer and buffer debloating (Flink's
    ``taskmanager.network.memory.buffer-debloat.*``; Cairn's buffers count records)."""

    batch_size: int = 1024  # largest buffer, in records
    min_batch_size: int = 16  # smallest buffer debloating may choose
    debloat_enabled: bool = False
    debloat_target_ms: int = 1_000
    debloat_period_ms: int = 200
    debloat_samples: int = 20
    debloat_threshold_percent: int = 25


@dataclass(frozen=True)
class JobSettings:
    job_name: str
    parallelism: int
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    checkpoint: CheckpointSettings = CheckpointSettings()
    restart: RestartSettings = RestartSettings()
    buffer_timeout_ms: int = 10  # flush partially filled network buffers after this long
    network: NetworkSettings = NetworkSettings()
    switch_interval_ms: int = 1  # the workers' sys.setswitchinterval (Python's default: 5 ms)
    # Every raw configuration key the user set (executor choice, spark master, ...).
    configuration: Mapping[str, str] = field(default_factory=dict)
    restore_path: str | None = None  # start from this retained checkpoint or savepoint
