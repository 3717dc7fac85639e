"""Validated, immutable job settings handed from the API to the job master and workers.

Invariant: the API validates user input and builds these once, on the driver (configuration
keys and the documented environment overrides alike); everything below the API reads only
these typed values (never a raw configuration key, a mutable config object or an environment
variable), so a running job cannot be reconfigured by accident and workers receive exactly
what the driver validated.
"""

from __future__ import annotations

import enum
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.events import AlignmentMode

DEFAULT_MAX_PARALLELISM = 128
DEFAULT_FORK_THRESHOLD = 100_000  # keyed-state entries from which a snapshot forks a child
DEFAULT_FORK_NICENESS = 15  # added to the snapshot child's nice value
FORK_THRESHOLD_ENV = "CAIRN_STATE_FORK_THRESHOLD"
FORK_NICENESS_ENV = "CAIRN_STATE_FORK_NICENESS"
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024  # bytes of one frame on a connection, either way
MAX_FRAME_SIZE_KEY = "cairn.network.max-frame-size"  # named in the wire layer's errors
SIGNING_KEY_ENV = "CAIRN_CHECKPOINT_SIGNING_KEY"
MIN_SIGNING_KEY_LENGTH = 16

log = logging.getLogger(__name__)


class RetentionPolicy(enum.Enum):
    """What happens to retained checkpoints when the job is cancelled (Flink names)."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"


@dataclass(frozen=True, repr=False)
class SigningKey:
    """The per-deployment secret that signs checkpoint metadata (``cairn.checkpoint.signing-key``
    or ``CAIRN_CHECKPOINT_SIGNING_KEY``); its value is never shown (``repr``, ``str``, errors).

    >>> key = SigningKey.parse("0123456789abcdef0123")
    >>> key, key == SigningKey.parse(" 0123456789abcdef0123 ")
    (SigningKey(<redacted>), True)
    >>> SigningKey.parse("short")
    Traceback (most recent call last):
    ...
    ValueError: a checkpoint signing key must have at least 16 characters (got 5), e.g. ...
    """

    secret: bytes

    @classmethod
    def parse(cls, text: str) -> SigningKey:
        """The key given as text (surrounding whitespace, e.g. a file's newline, is dropped)."""
        problem = signing_key_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return cls(text.strip().encode("utf-8"))

    def __repr__(self) -> str:
        return "SigningKey(<redacted>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigningKey) and hmac.compare_digest(self.secret, other.secret)

    def __hash__(self) -> int:
        return hash(SigningKey)


def signing_key_problem(text: object) -> str | None:
    """Why ``text`` cannot be a signing key (without echoing it), or None."""
    if not isinstance(text, str):
        return "a checkpoint signing key must be a string"
    n = len(text.strip())
    if n < MIN_SIGNING_KEY_LENGTH:
        return (
            f"a checkpoint signing key must have at least {MIN_SIGNING_KEY_LENGTH} characters "
            f"(got {n}), e.g. the output of `openssl rand -hex 32`"
        )
    return None


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
    storage_url: str | None = None  # None: file://<tempdir>/cairn-checkpoints-<uid>
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # credentials
    unaligned: bool = False
    aligned_timeout_ms: int = 0
    # Signs _metadata (HMAC-SHA256); set, the job restores only checkpoints it verifies.
    signing_key: SigningKey | None = None
    # Where a savepoint goes when none is given (a new savepoint-<job>-<random> in it).
    savepoint_dir: str | None = None

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0


@dataclass(frozen=True)
class HighAvailabilitySettings:
    """``high-availability.*``: one leader per job through a lease in ``storage_dir``
    (``<storageDir>/<job-id>/``; None: ``_ha`` under the default checkpoint storage)."""

    enabled: bool = False
    storage_dir: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # credentials
    lease_ms: int = 6_000
    renew_interval_ms: int = 2_000


class RestoreMode(enum.Enum):
    """Who owns a retained checkpoint a job starts from (``execution.savepoint-restore-mode``,
    Flink's names): CLAIM hands it to the job, which deletes it once subsumed; NO_CLAIM
    leaves it to the user. A savepoint is never deleted by a job."""

    CLAIM = "CLAIM"
    NO_CLAIM = "NO_CLAIM"


class RerunPolicy(enum.Enum):
    """What a run does with completed checkpoints an earlier run of the same job left
    (``cairn.recovery.on-rerun``): RESUME unless that run ended FINISHED or CANCELED,
    FORCE_RESUME however it ended, FRESH (never resume), REFUSE (fail instead of resuming)."""

    RESUME = "RESUME"
    FORCE_RESUME = "FORCE_RESUME"
    FRESH = "FRESH"
    REFUSE = "REFUSE"


@dataclass(frozen=True)
class RestSettings:
    """The job's control endpoint on the driver (``rest.*`` keys, Flink's names).

    ``bind_address``: where the HTTP server listens; ``address``: the host clients are told
    to use (the job registry's URL); ``port``: 0 picks a free port (one endpoint per job,
    several jobs per machine); ``token``: require the per-job bearer token kept in the
    private job registry (``cairn.rest.token.enabled``); ``registry_dir``: that registry
    (None: ``<tmp>/cairn-jobs-<uid>``); ``archive_dir``: where ended jobs are archived
    (``jobmanager.archive.fs.dir``; None: ``<registry>/archive``), keeping the newest
    ``archive_retained`` (-1: all).

    >>> RestSettings(port=70000)
    Traceback (most recent call last):
    ...
    ValueError: rest.port must be between 0 and 65535, got 70000
    """

    enabled: bool = True
    address: str = "127.0.0.1"
    bind_address: str = "127.0.0.1"
    port: int = 0
    token: bool = True
    registry_dir: str | None = None
    archive_dir: str | None = None
    archive_retained: int = 100

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"rest.port must be between 0 and 65535, got {self.port}")
        if self.archive_retained == 0 or self.archive_retained < -1:
            raise ValueError(
                "historyserver.archive.retained-jobs must be -1 or >= 1, got "
                f"{self.archive_retained}"
            )


@dataclass(frozen=True)
class MetricsSettings:
    """Metric reporters (``metrics.reporters``, ``metrics.reporter.prom.*``, Flink's keys):
    ``prometheus`` starts an HTTP server for Prometheus on ``host:port`` (0: a free port);
    latency tracking (``metrics.latency.*``).

    >>> MetricsSettings(prometheus=True, port=-1)
    Traceback (most recent call last):
    ...
    ValueError: metrics.reporter.prom.port must be between 0 and 65535, got -1
    """

    prometheus: bool = False
    host: str = "127.0.0.1"
    port: int = 9249
    # Latency tracking (``metrics.latency.*``): marker interval (0: off), granularity
    # ("single", "operator", "subtask") and histogram window.
    latency_interval_ms: int = 0
    latency_granularity: str = "operator"
    latency_history_size: int = 128

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(
                f"metrics.reporter.prom.port must be between 0 and 65535, got {self.port}"
            )


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
    ``taskmanager.network.memory.buffer-debloat.*``; Cairn's buffers count records), and the
    largest frame (bytes) a connection sends or accepts (``cairn.network.max-frame-size``)."""

    batch_size: int = 1024  # largest buffer, in records
    min_batch_size: int = 16  # smallest buffer debloating may choose
    debloat_enabled: bool = False
    debloat_target_ms: int = 1_000
    debloat_period_ms: int = 200
    debloat_samples: int = 20
    debloat_threshold_percent: int = 25
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one side of TLS (Flink's keystore and truststore, as Python's ``ssl``
    reads them): ``keystore`` holds this side's certificate chain and private key,
    ``truststore`` the CA certificates a peer's certificate must chain to, ``key_password``
    decrypts an encrypted private key (never shown).

    >>> TlsFiles("/etc/cairn/internal.pem", "/etc/cairn/ca.pem", key_password="x")
    TlsFiles(keystore='/etc/cairn/internal.pem', truststore='/etc/cairn/ca.pem')
    """

    keystore: str
    truststore: str
    key_password: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SecuritySettings:
    """``security.ssl.*`` (Flink's keys): ``internal`` (None: off) secures every connection
    between the driver and the workers and between workers, with mutual authentication;
    ``rest`` (None: off) serves the control endpoint over HTTPS, requiring client
    certificates too when ``rest_authentication``.

    >>> SecuritySettings(rest_authentication=True)
    Traceback (most recent call last):
    ...
    ValueError: security.ssl.rest.authentication-enabled needs security.ssl.rest.enabled
    """

    internal: TlsFiles | None = None
    rest: TlsFiles | None = None
    rest_authentication: bool = False

    def __post_init__(self) -> None:
        if self.rest_authentication and self.rest is None:
            raise ValueError(
                "security.ssl.rest.authentication-enabled needs security.ssl.rest.enabled"
            )


class ExecutorKind(enum.Enum):
    """Where the workers run (``cairn.executor``)."""

    SPARK = "spark"  # tasks of one Spark barrier stage, a process each
    INPROCESS = "inprocess"  # threads of the driver: for tests and debugging


@dataclass(frozen=True)
class DeploySettings:
    """Where and how the job's workers run (the ``cairn.*`` deployment keys).

    >>> DeploySettings(ExecutorKind.INPROCESS, workers=2).workers
    2
    >>> DeploySettings(workers=0)
    Traceback (most recent call last):
    ...
    ValueError: cairn.workers must be at least 1, got 0
    """

    executor: ExecutorKind = ExecutorKind.SPARK
    workers: int | None = None  # None: one per subtask of the widest operator (within slots)
    spark_master: str | None = None  # None: the active session, else local[*]
    spark_conf: Mapping[str, str] = field(default_factory=dict)  # the job's spark.* keys
    progress: bool = False  # print a progress line to stderr
    testing_faults: str = ""  # fault injection for recovery tests (see cairn.runtime.faults)

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"cairn.workers must be at least 1, got {self.workers}")


class StateBackendKind(enum.Enum):
    """Where keyed state lives (``state.backend.type``)."""

    HASHMAP = "hashmap"  # Python objects in the worker's memory
    ROCKSDB = "rocksdb"  # an embedded RocksDB per subtask on the worker's local disk


@dataclass(frozen=True)
class RocksDBSettings:
    """The RocksDB backend's local directory (``None``: the worker's temp dir) and memory
    bounds per database (Flink's ``state.backend.rocksdb.*`` keys; their defaults, but a
    64 MB block cache: see ``state.rocksdb.db``)."""

    local_dir: str | None = None
    block_cache_bytes: int = 64 << 20
    write_buffer_bytes: int = 64 << 20
    write_buffer_count: int = 2
    transfer_threads: int = 4  # state.backend.rocksdb.checkpoint.transfer.thread.num


@dataclass(frozen=True)
class StateSettings:
    """Which keyed-state backend a job uses, and how the heap backend writes large snapshots.

    ``fork_threshold``: entries from which the asynchronous part is serialized by a forked
    child instead of a thread (``None``: never fork); ``fork_niceness``: added to the child's
    nice value. Both default to the measured values and may be overridden by the documented
    environment variables, read once by :meth:`from_environ` when the API builds the settings.
    ``incremental``: the RocksDB backend uploads only SST files no completed checkpoint has.
    ``local_recovery``: workers keep local copies of the state files they write and restore
    from them on the same host (``local_recovery_dir``: where).
    """

    fork_threshold: int | None = DEFAULT_FORK_THRESHOLD
    fork_niceness: int = DEFAULT_FORK_NICENESS
    backend: StateBackendKind = StateBackendKind.HASHMAP
    incremental: bool = False
    rocksdb: RocksDBSettings = RocksDBSettings()
    local_recovery: bool = False  # state.backend.local-recovery
    local_recovery_dir: str | None = None  # None: cairn-local-recovery-<uid> in the temp dir

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> StateSettings:
        """The defaults overridden by ``CAIRN_STATE_FORK_THRESHOLD`` (``off``/``none``: never
        fork) and ``CAIRN_STATE_FORK_NICENESS``; a value that is not an integer is ignored
        with a warning.

        >>> StateSettings.from_environ({"CAIRN_STATE_FORK_THRESHOLD": "off"}).fork_threshold
        >>> StateSettings.from_environ({"CAIRN_STATE_FORK_NICENESS": "5"}).fork_niceness
        5
        """
        threshold: int | None
        if environ.get(FORK_THRESHOLD_ENV, "").strip().lower() in ("off", "none"):
            threshold = None
        else:
            threshold = _env_int(environ, FORK_THRESHOLD_ENV, DEFAULT_FORK_THRESHOLD)
        niceness = _env_int(environ, FORK_NICENESS_ENV, DEFAULT_FORK_NICENESS)
        return cls(threshold, niceness)


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        log.warning("ignoring %s=%r: not an integer", name, raw)
        return default


@dataclass(frozen=True)
class JobSettings:
    job_name: str
    parallelism: int
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    checkpoint: CheckpointSettings = CheckpointSettings()
    restart: RestartSettings = RestartSettings()
    buffer_timeout_ms: int = 10  # flush partially filled network buffers after this long
    buffer_linger_ms: int = 2  # a busy worker's input and sources wait up to this long
    auto_watermark_interval_ms: int = 200  # periodic watermarks (0: only the final one)
    network: NetworkSettings = NetworkSettings()
    switch_interval_ms: int = 1  # the workers' sys.setswitchinterval (Python's default: 5 ms)
    # Every configuration key the user set, as text: a record of the job's configuration.
    # Nothing below the API reads it; the typed fields are the settings.
    configuration: Mapping[str, str] = field(default_factory=dict)
    restore_path: str | None = None  # start from this retained checkpoint or savepoint
    restore_ignore_unclaimed: bool = False  # allow state of removed operators in restore_path
    restore_mode: RestoreMode = RestoreMode.NO_CLAIM  # of a retained checkpoint in restore_path
    # The job's identity across runs (high-availability.cluster-id); None: derived from the
    # job name and the checkpoint storage URL (checkpoint/job_identity.py).
    cluster_id: str | None = None
    on_rerun: RerunPolicy = RerunPolicy.RESUME  # cairn.recovery.on-rerun
    # Recovery may restore a checkpoint older than an unusable one whose output committing
    # sinks may have committed (the output in between is committed twice).
    allow_fallback_past_committed: bool = False
    operator_chaining: bool = True  # chain forward-connected operators of equal parallelism
    job_parameters: Mapping[str, str] = field(default_factory=dict)  # RuntimeContext's
    deploy: DeploySettings = DeploySettings()
    state: StateSettings = StateSettings()
    rest: RestSettings = RestSettings()
    metrics: MetricsSettings = MetricsSettings()
    ha: HighAvailabilitySettings = HighAvailabilitySettings()  # high-availability.*
    security: SecuritySettings = SecuritySettings()  # security.ssl.*
    # execution.runtime-mode: BATCH (cairn.batch runs the job stage by stage, no checkpoints)
    batch: bool = False

    def checkpoint_properties(self) -> dict[str, str]:
        """The checkpoint configuration under Flink's keys, kept in every checkpoint's
        ``_metadata`` so that ``cairn doctor`` can judge a retained checkpoint alone.

        >>> JobSettings("j", 1).checkpoint_properties()["execution.checkpointing.unaligned.enabled"]
        'false'
        """
        cp, cpk = self.checkpoint, "execution.checkpointing."
        return {
            cpk + "interval": str(cp.interval_ms),
            cpk + "timeout": str(cp.timeout_ms),
            cpk + "min-pause": str(cp.min_pause_ms),
            cpk + "unaligned.enabled": str(cp.unaligned).lower(),
            cpk + "aligned-checkpoint-timeout": str(cp.aligned_timeout_ms),
            cpk + "incremental": str(self.state.incremental).lower(),
            "taskmanager.network.memory.buffer-debloat.enabled": str(
                self.network.debloat_enabled
            ).lower(),
            "state.backend.type": self.state.backend.value,
        }
