"""Checkpointing options (``execution.checkpointing.*``, savepoint directory, signing key).

Invariant: every key here is registered on import with Flink's name, default and deprecated
aliases; durations are milliseconds once parsed.
"""

from __future__ import annotations

from cairn.common.options.define import MS, at_least, define, filesystem_url, spellings
from cairn.settings import SIGNING_KEY_ENV, signing_key_problem

CP = "execution.checkpointing."

CHECKPOINTING_INTERVAL = define(
    CP + "interval",
    "duration",
    None,
    "Interval of periodic checkpoints; unset: disabled.",
    check=at_least(10, "checkpoint interval", MS),
)
CHECKPOINTING_MODE = define(
    CP + "mode",
    "enum",
    "EXACTLY_ONCE",
    "EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE.",
    choices=spellings(("EXACTLY_ONCE",), ("AT_LEAST_ONCE",)),
)
CHECKPOINTING_TIMEOUT = define(
    CP + "timeout",
    "duration",
    600_000,
    "A checkpoint not complete after this is aborted.",
    check=at_least(10, "checkpoint timeout", MS),
)
CHECKPOINTING_MIN_PAUSE = define(
    CP + "min-pause",
    "duration",
    0,
    "Minimal pause between the end of a checkpoint and the start of the next.",
)
CHECKPOINTING_MAX_CONCURRENT = define(
    CP + "max-concurrent-checkpoints",
    "int",
    1,
    "Checkpoints that may be in flight at once.",
    check=at_least(1, "the maximum number of concurrent checkpoints"),
)
CHECKPOINTING_TOLERABLE_FAILURES = define(
    CP + "tolerable-failed-checkpoints",
    "int",
    0,
    "Consecutive checkpoint failures tolerated before the job fails over.",
    check=at_least(0, "the tolerable checkpoint failure number"),
)
CHECKPOINTING_NUM_RETAINED = define(
    CP + "num-retained",
    "int",
    1,
    "Completed checkpoints kept in storage.",
    "state.checkpoints.num-retained",
    check=at_least(1, "the number of retained checkpoints"),
)
CHECKPOINTING_RETENTION = define(
    CP + "externalized-checkpoint-retention",
    "enum",
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to retained checkpoints when the job is cancelled.",
    choices=spellings(
        ("DELETE_ON_CANCELLATION",), ("RETAIN_ON_CANCELLATION",), ("NO_EXTERNALIZED_CHECKPOINTS",)
    ),
)
CHECKPOINTING_DIR = define(
    CP + "dir",
    "str",
    None,
    "Checkpoint storage URL or path (file://, hdfs://, s3://, memory://).",
    "state.checkpoints.dir",
    check=filesystem_url,
)
CHECKPOINTING_STORAGE = define(
    CP + "storage",
    "enum",
    None,
    "jobmanager or filesystem (set by set_checkpoint_storage).",
    "state.checkpoint-storage",
    choices=spellings(("jobmanager",), ("filesystem",)),
)
SAVEPOINT_DIR = define(
    CP + "savepoint-dir",
    "str",
    None,
    "Default directory of savepoints.",
    "state.savepoints.dir",
    check=filesystem_url,
)
CHECKPOINT_SIGNING_KEY = define(
    "cairn.checkpoint.signing-key",
    "str",
    None,
    "Secret that signs checkpoint metadata (HMAC-SHA256); set, a job restores only checkpoints "
    f"signed with it. Default: the environment variable {SIGNING_KEY_ENV}, else unsigned.",
    check=signing_key_problem,
    secret=True,
)
CHECKPOINTING_UNALIGNED = define(
    CP + "unaligned.enabled",
    "bool",
    False,
    "Unaligned checkpoints (exactly-once only).",
    CP + "unaligned",
)
CHECKPOINTING_ALIGNED_TIMEOUT = define(
    CP + "aligned-checkpoint-timeout",
    "duration",
    0,
    "With unaligned checkpoints: start aligned, switch to unaligned after this; 0: always "
    "unaligned.",
    CP + "alignment-timeout",
)
CHECKPOINTING_INCREMENTAL = define(
    CP + "incremental",
    "bool",
    False,
    "Incremental checkpoints (RocksDB backend): upload only new SST files.",
    "state.backend.incremental",
)
