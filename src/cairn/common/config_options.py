"""Every configuration key Cairn understands, with Flink's names, defaults and aliases.

Invariant: importing this module registers all built-in keys (other layers add theirs with
``register_option``); it re-exports the registry API, so ``config_options`` is the one module
callers need. Keys under ``spark.`` (and PyFlink's ``python.``) pass through unvalidated.

>>> get_option("state.checkpoints.num-retained").key
'execution.checkpointing.num-retained'
>>> get_option("execution.checkpointing.interval").parse("1 min")
60000
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.common import config_registry
from cairn.common.config_registry import *  # noqa: F403  (the registry API, re-exported)
from cairn.common.config_registry import (
    Check,
    ConfigOption,
    register_option,
    register_passthrough_prefix,
)
from cairn.common.filesystems import filesystem_url_problem
from cairn.settings import (
    DEFAULT_MAX_FRAME_SIZE,
    MAX_FRAME_SIZE_KEY,
    SIGNING_KEY_ENV,
    signing_key_problem,
)

__all__ = config_registry.__all__

# ------------------------------------------------------------------------------ built-ins


def _at_least(minimum: float, what: str, unit: str = "") -> Check:
    def check(v: Any) -> str | None:
        return f"{what} must be at least {minimum}{unit}, got {v}{unit}" if v < minimum else None

    return check


def _between(low: float, high: float, what: str) -> Check:
    def check(v: Any) -> str | None:
        return f"{what} must be between {low} and {high}, got {v}" if not low <= v <= high else None

    return check


def _non_empty(v: Any) -> str | None:
    return "must not be empty" if not v else None


def _filesystem_url(v: Any) -> str | None:
    return _non_empty(v) or filesystem_url_problem(str(v))


def _max_parallelism(v: Any) -> str | None:
    if v == -1 or 1 <= v <= 32768:
        return None
    return f"max parallelism must be between 1 and 32768 (or -1 for automatic), got {v}"


def _define(
    key: str,
    kind: str,
    default: Any,
    description: str,
    *aliases: str,
    choices: Mapping[str, str] | None = None,
    check: Check | None = None,
    secret: bool = False,
) -> ConfigOption:
    return register_option(
        ConfigOption(
            key, kind, default, description, tuple(aliases), dict(choices or {}), check, secret
        )
    )


def _spellings(*groups: tuple[str, ...]) -> dict[str, str]:
    """``("none", "off")`` -> ``{"none": "none", "off": "none"}``: first spelling is canonical."""
    return {s.lower(): group[0] for group in groups for s in group}


CP = "execution.checkpointing."
RS = "restart-strategy."
_MS = " ms"

CHECKPOINTING_INTERVAL = _define(
    CP + "interval",
    "duration",
    None,
    "Interval of periodic checkpoints; unset: disabled.",
    check=_at_least(10, "checkpoint interval", _MS),
)
CHECKPOINTING_MODE = _define(
    CP + "mode",
    "enum",
    "EXACTLY_ONCE",
    "EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE.",
    choices=_spellings(("EXACTLY_ONCE",), ("AT_LEAST_ONCE",)),
)
CHECKPOINTING_TIMEOUT = _define(
    CP + "timeout",
    "duration",
    600_000,
    "A checkpoint not complete after this is aborted.",
    check=_at_least(10, "checkpoint timeout", _MS),
)
CHECKPOINTING_MIN_PAUSE = _define(
    CP + "min-pause",
    "duration",
    0,
    "Minimal pause between the end of a checkpoint and the start of the next.",
)
CHECKPOINTING_MAX_CONCURRENT = _define(
    CP + "max-concurrent-checkpoints",
    "int",
    1,
    "Checkpoints that may be in flight at once.",
    check=_at_least(1, "the maximum number of concurrent checkpoints"),
)
CHECKPOINTING_TOLERABLE_FAILURES = _define(
    CP + "tolerable-failed-checkpoints",
    "int",
    0,
    "Consecutive checkpoint failures tolerated before the job fails over.",
    check=_at_least(0, "the tolerable checkpoint failure number"),
)
CHECKPOINTING_NUM_RETAINED = _define(
    CP + "num-retained",
    "int",
    1,
    "Completed checkpoints kept in storage.",
    "state.checkpoints.num-retained",
    check=_at_least(1, "the number of retained checkpoints"),
)
CHECKPOINTING_RETENTION = _define(
    CP + "externalized-checkpoint-retention",
    "enum",
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to retained checkpoints when the job is cancelled.",
    choices=_spellings(
        ("DELETE_ON_CANCELLATION",), ("RETAIN_ON_CANCELLATION",), ("NO_EXTERNALIZED_CHECKPOINTS",)
    ),
)
CHECKPOINTING_DIR = _define(
    CP + "dir",
    "str",
    None,
    "Checkpoint storage URL or path (file://, hdfs://, s3://, memory://).",
    "state.checkpoints.dir",
    check=_filesystem_url,
)
CHECKPOINTING_STORAGE = _define(
    CP + "storage",
    "enum",
    None,
    "jobmanager or filesystem (set by set_checkpoint_storage).",
    "state.checkpoint-storage",
    choices=_spellings(("jobmanager",), ("filesystem",)),
)
SAVEPOINT_DIR = _define(
    CP + "savepoint-dir",
    "str",
    None,
    "Default directory of savepoints.",
    "state.savepoints.dir",
    check=_filesystem_url,
)
CHECKPOINT_SIGNING_KEY = _define(
    "cairn.checkpoint.signing-key",
    "str",
    None,
    "Secret that signs checkpoint metadata (HMAC-SHA256); set, a job restores only checkpoints "
    f"signed with it. Default: the environment variable {SIGNING_KEY_ENV}, else unsigned.",
    check=signing_key_problem,
    secret=True,
)
CHECKPOINTING_UNALIGNED = _define(
    CP + "unaligned.enabled",
    "bool",
    False,
    "Unaligned checkpoints (exactly-once only).",
    CP + "unaligned",
)
CHECKPOINTING_ALIGNED_TIMEOUT = _define(
    CP + "aligned-checkpoint-timeout",
    "duration",
    0,
    "With unaligned checkpoints: start aligned, switch to unaligned after this; 0: always "
    "unaligned.",
    CP + "alignment-timeout",
)
CHECKPOINTING_INCREMENTAL = _define(
    CP + "incremental",
    "bool",
    False,
    "Incremental checkpoints (RocksDB backend): upload only new SST files.",
    "state.backend.incremental",
)
STATE_BACKEND = _define(
    "state.backend.type",
    "enum",
    "hashmap",
    "hashmap (state as Python objects in worker memory) or rocksdb (embedded RocksDB on "
    "local disk).",
    "state.backend",
    choices=_spellings(("hashmap", "jobmanager", "filesystem"), ("rocksdb",)),
)
ROCKSDB_LOCALDIR = _define(
    "state.backend.rocksdb.localdir",
    "str",
    None,
    "Local directory of the RocksDB backend's working files (default: the temp dir).",
    "state.backend.rocksdb.local-dir",
    check=_non_empty,
)
ROCKSDB_BLOCK_CACHE = _define(
    "state.backend.rocksdb.block.cache-size",
    "memory",
    8 << 20,
    "RocksDB block cache per subtask and operator.",
    check=_at_least(1, "block cache size", " bytes"),
)
ROCKSDB_WRITE_BUFFER_SIZE = _define(
    "state.backend.rocksdb.writebuffer.size",
    "memory",
    64 << 20,
    "RocksDB memtable size; all memtables of a database together are capped at size x count.",
    check=_at_least(1, "write buffer size", " bytes"),
)
ROCKSDB_WRITE_BUFFER_COUNT = _define(
    "state.backend.rocksdb.writebuffer.count",
    "int",
    2,
    "RocksDB memtables per column family (and the cap's multiplier).",
    check=_at_least(1, "write buffer count"),
)

RESTART_TYPE = _define(
    RS + "type",
    "enum",
    None,
    "none, fixed-delay, exponential-delay or failure-rate; unset: "
    "exponential-delay with checkpointing, none without.",
    "restart-strategy",
    choices=_spellings(
        ("none", "off", "disable"),
        ("fixed-delay", "fixeddelay"),
        ("exponential-delay", "exponentialdelay"),
        ("failure-rate", "failurerate"),
    ),
)
FIXED_DELAY_ATTEMPTS = _define(
    RS + "fixed-delay.attempts",
    "int",
    1,
    "Restarts before the job fails.",
    check=_at_least(0, "fixed-delay attempts"),
)
FIXED_DELAY_DELAY = _define(RS + "fixed-delay.delay", "duration", 1_000, "Delay between restarts.")
EXP_INITIAL_BACKOFF = _define(
    RS + "exponential-delay.initial-backoff",
    "duration",
    1_000,
    "First restart delay.",
    check=_at_least(1, "initial backoff", _MS),
)
EXP_MAX_BACKOFF = _define(
    RS + "exponential-delay.max-backoff",
    "duration",
    60_000,
    "Upper bound of the delay.",
    check=_at_least(1, "max backoff", _MS),
)
EXP_MULTIPLIER = _define(
    RS + "exponential-delay.backoff-multiplier",
    "float",
    1.5,
    "Delay growth per failure.",
    check=_at_least(1.0, "backoff multiplier"),
)
EXP_RESET_THRESHOLD = _define(
    RS + "exponential-delay.reset-backoff-threshold",
    "duration",
    3_600_000,
    "Running this long without failure resets the backoff.",
    check=_at_least(1, "reset backoff threshold", _MS),
)
EXP_JITTER = _define(
    RS + "exponential-delay.jitter-factor",
    "float",
    0.1,
    "Random +/- share of each delay.",
    check=_between(0.0, 1.0, "jitter factor"),
)
EXP_ATTEMPTS = _define(
    RS + "exponential-delay.attempts-before-reset-backoff",
    "int",
    2**31 - 1,
    "Restarts allowed before the backoff is reset.",
    check=_at_least(1, "attempts before reset backoff"),
)
FAILURE_RATE_MAX = _define(
    RS + "failure-rate.max-failures-per-interval",
    "int",
    1,
    "Failures within the interval before the job fails.",
    check=_at_least(1, "max failures per interval"),
)
FAILURE_RATE_INTERVAL = _define(
    RS + "failure-rate.failure-rate-interval",
    "duration",
    60_000,
    "Failure counting window.",
    check=_at_least(1, "failure rate interval", _MS),
)
FAILURE_RATE_DELAY = _define(
    RS + "failure-rate.delay", "duration", 1_000, "Delay between restarts."
)

PARALLELISM = _define(
    "parallelism.default",
    "int",
    1,
    "Default parallelism of operators.",
    check=_at_least(1, "parallelism"),
)
MAX_PARALLELISM = _define(
    "pipeline.max-parallelism",
    "int",
    -1,
    "Number of key groups; -1: derived from the parallelism (at least 128).",
    check=_max_parallelism,
)
JOB_NAME = _define(
    "pipeline.name", "str", None, "Job name when execute() is given none.", check=_non_empty
)
OPERATOR_CHAINING = _define(
    "pipeline.operator-chaining.enabled",
    "bool",
    True,
    "Chain operators into tasks.",
    "pipeline.operator-chaining",
)
AUTO_WATERMARK_INTERVAL = _define(
    "pipeline.auto-watermark-interval",
    "duration",
    200,
    "How often sources and assign_timestamps_and_watermarks emit watermarks (0: only the "
    "final one at end of input).",
)
OBJECT_REUSE = _define("pipeline.object-reuse", "bool", False, "Accepted; has no effect.")
JOB_PARAMETERS = _define(
    "pipeline.global-job-parameters",
    "map",
    None,
    "Parameters read by RuntimeContext.get_job_parameter ('k1:v1,k2:v2').",
)
RUNTIME_MODE = _define(
    "execution.runtime-mode",
    "enum",
    "STREAMING",
    "STREAMING or AUTOMATIC (BATCH unsupported).",
    choices=_spellings(("STREAMING",), ("BATCH",), ("AUTOMATIC",)),
)
BUFFER_TIMEOUT = _define(
    "execution.buffer-timeout.interval",
    "duration",
    10,
    "Flush partially filled network buffers after this long; 0: after every batch. "
    "Cairn's default is 10 ms (Flink: 100 ms): buffers hold up to 1024 records, not 32 KiB, "
    "so at moderate rates they fill slowly and the timeout bounds latency.",
    "execution.buffer-timeout",
)
BUFFER_TIMEOUT_ENABLED = _define(
    "execution.buffer-timeout.enabled",
    "bool",
    True,
    "false: flush buffers only when full (set_buffer_timeout(-1)).",
)


def _positive(v: Any) -> str | None:
    return None if v >= 1 else f"must be >= 1, got {v}"


NETWORK_BATCH_SIZE = _define(
    "cairn.network.batch-size",
    "int",
    1024,
    "Records per network buffer (the largest size when buffer debloating is on). Cairn's "
    "buffers count records, not bytes (Flink: taskmanager.memory.segment-size, 32 KiB).",
    check=_positive,
)
NETWORK_MIN_BATCH_SIZE = _define(
    "cairn.network.min-batch-size",
    "int",
    16,
    "Smallest buffer, in records, that buffer debloating may choose (Flink: "
    "taskmanager.memory.min-segment-size).",
    check=_positive,
)
NETWORK_MAX_FRAME_SIZE = _define(
    MAX_FRAME_SIZE_KEY,
    "memory",
    DEFAULT_MAX_FRAME_SIZE,
    "Largest frame (a pickled batch of records, an event or a control message) a connection "
    "sends or accepts, e.g. '64 mb'. A receiver refuses a longer frame before allocating "
    "memory for it; a task whose batch pickles to more fails, naming the edge (lower "
    "cairn.network.batch-size for large records, or raise this cap).",
    # At least 1 MiB: control messages (failure reports with tracebacks) must fit; at most
    # what a frame header's uint32 length can say.
    check=_between(1 << 20, 0xFFFFFFFF, "the frame size cap (bytes)"),
)
WORKER_SWITCH_INTERVAL = _define(
    "cairn.worker.switch-interval",
    "duration",
    1,
    "Python thread switch interval of the workers (sys.setswitchinterval; Python's default is "
    "5 ms): how soon network, control and snapshot threads get the GIL from a busy task thread.",
    check=_positive,
)
NET = "taskmanager.network.memory."
DEBLOAT_ENABLED = _define(
    NET + "buffer-debloat.enabled",
    "bool",
    False,
    "Resize network buffers so that the in-flight data of each input takes about "
    "buffer-debloat.target to process.",
)
DEBLOAT_TARGET = _define(
    NET + "buffer-debloat.target",
    "duration",
    1_000,
    "Time the in-flight data of an input should take to process (buffer debloating).",
)
DEBLOAT_PERIOD = _define(
    NET + "buffer-debloat.period",
    "duration",
    200,
    "How often buffer debloating measures throughput and recomputes the buffer size.",
)
DEBLOAT_SAMPLES = _define(
    NET + "buffer-debloat.samples",
    "int",
    20,
    "Throughput measurements averaged (exponential moving average over this many periods).",
    check=_positive,
)
DEBLOAT_THRESHOLD = _define(
    NET + "buffer-debloat.threshold-percentages",
    "int",
    25,
    "Change the buffer size only if the new size differs by more than this many percent.",
)
RESTORE_PATH = _define(
    "execution.state-recovery.path",
    "str",
    None,
    "Start from this checkpoint or savepoint.",
    "execution.savepoint.path",
    check=_filesystem_url,
)
RESTORE_IGNORE_UNCLAIMED = _define(
    "execution.state-recovery.ignore-unclaimed-state",
    "bool",
    False,
    "Allow restoring when state of a removed operator is in the snapshot.",
    "execution.savepoint.ignore-unclaimed-state",
)
RESTORE_MODE = _define(
    "execution.state-recovery.claim-mode",
    "enum",
    "NO_CLAIM",
    "Who owns a retained checkpoint the job starts from: CLAIM (the job deletes it once "
    "subsumed) or NO_CLAIM (left to the user). Savepoints are never deleted.",
    "execution.savepoint-restore-mode",
    choices=_spellings(("CLAIM",), ("NO_CLAIM",)),
)
ALLOW_FALLBACK_PAST_COMMITTED = _define(
    "cairn.recovery.allow-fallback-past-committed",
    "bool",
    False,
    "Let recovery skip an unusable checkpoint whose completion was announced and restore an "
    "older one even though the job has committing sinks (sink_to with a committer, "
    "execute_and_collect): the output committed between the two checkpoints is written again "
    "(duplicates). By default such a recovery fails the job, naming the checkpoint.",
)

S3_ENDPOINT = _define(
    "s3.endpoint",
    "str",
    None,
    "S3 endpoint URL for s3:// checkpoint storage (an S3-compatible server: SeaweedFS, MinIO); "
    "default: AWS, or AWS_ENDPOINT_URL.",
    check=_non_empty,
)
S3_ACCESS_KEY = _define(
    "s3.access-key",
    "str",
    None,
    "S3 access key id; default: AWS_ACCESS_KEY_ID or the AWS credential files.",
    "s3.access.key",
    check=_non_empty,
)
S3_SECRET_KEY = _define(
    "s3.secret-key",
    "str",
    None,
    "S3 secret access key; default: AWS_SECRET_ACCESS_KEY or the AWS credential files.",
    "s3.secret.key",
    check=_non_empty,
)
S3_PATH_STYLE_ACCESS = _define(
    "s3.path.style.access",
    "bool",
    False,
    "Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint> (S3-compatible "
    "servers on one host need this).",
)
S3_REGION = _define(
    "s3.region",
    "str",
    None,
    "S3 region; default: AWS_REGION or the AWS config file.",
    check=_non_empty,
)

EXECUTOR = _define(
    "cairn.executor",
    "enum",
    "spark",
    "spark (PySpark barrier tasks) or inprocess (threads).",
    choices=_spellings(("spark",), ("inprocess", "in-process", "local")),
)
SPARK_MASTER = _define(
    "cairn.spark.master",
    "str",
    None,
    "Spark master URL; default: the active session, else local[*].",
    check=_non_empty,
)
PROGRESS = _define("cairn.progress", "bool", False, "Print job progress to stderr.")
WORKERS = _define(
    "cairn.workers",
    "int",
    None,
    "Number of workers (Spark barrier tasks); default: one per parallel subtask, "
    "bounded by the task slots Spark offers.",
    check=_at_least(1, "the number of workers"),
)
TESTING_FAULTS = _define(
    "cairn.testing.faults",
    "str",
    "",
    "Fault injection for recovery tests, e.g. "
    "'point=processing,attempt=0,records=5000;point=during-upload,attempt=1' "
    "(see cairn.runtime.faults).",
)

REST_ENABLED = _define(
    "cairn.rest.enabled",
    "bool",
    True,
    "Serve the job's control endpoint (HTTP, Flink's REST paths) and list the job in the "
    "per-user job registry that `cairn list`, `cairn savepoint`, `cairn stop` and "
    "`cairn cancel` read.",
)
REST_ADDRESS = _define(
    "rest.address",
    "str",
    "127.0.0.1",
    "Host name or address clients use to reach the job's control endpoint.",
    check=_non_empty,
)
REST_BIND_ADDRESS = _define(
    "rest.bind-address",
    "str",
    "127.0.0.1",
    "Address the control endpoint listens on (0.0.0.0: every interface).",
    check=_non_empty,
)
REST_PORT = _define(
    "rest.port",
    "int",
    0,
    "Port of the control endpoint; 0 picks a free one (one endpoint per job).",
    check=_between(0, 65535, "rest.port"),
)
REST_TOKEN_ENABLED = _define(
    "cairn.rest.token.enabled",
    "bool",
    True,
    "Require the job's bearer token (kept in the private job registry) on every request to "
    "the control endpoint; false lets anyone who can reach it control the job.",
)

METRICS_REPORTERS = _define(
    "metrics.reporters",
    "str",
    "",
    "Metric reporters to start, comma-separated (Flink's key); 'prom' serves the job's "
    "metrics in Prometheus text format at http://<metrics.reporter.prom.host>:"
    "<metrics.reporter.prom.port>/metrics. The control endpoint serves /metrics either way.",
)
METRICS_PROM_HOST = _define(
    "metrics.reporter.prom.host",
    "str",
    "127.0.0.1",
    "Address the Prometheus reporter listens on (0.0.0.0: every interface).",
    check=_non_empty,
)
METRICS_PROM_PORT = _define(
    "metrics.reporter.prom.port",
    "int",
    9249,
    "Port of the Prometheus reporter (Flink's default 9249); 0 picks a free one.",
    check=_between(0, 65535, "metrics.reporter.prom.port"),
)

PIPELINE_JARS = _define("pipeline.jars", "str", None, "Accepted for PyFlink scripts; ignored.")
PIPELINE_CLASSPATHS = _define(
    "pipeline.classpaths", "str", None, "Accepted for PyFlink scripts; ignored."
)

register_passthrough_prefix("spark.", "Spark configuration, passed to the Spark session")
register_passthrough_prefix("python.", "PyFlink's Python worker options, accepted and ignored")
