"""From an environment's plan and configuration to a validated job (``JobSettings`` + sinks).

Invariant: pure with respect to the plan (nothing is mutated) and complete: a job that passes
``prepare_job`` has a sink, unique uids, user functions that pickle, and settings that parsed;
so every submission error is raised on the driver, before Spark is touched. This is the one
place that turns configuration keys (and the documented ``CAIRN_STATE_*`` and
``CAIRN_CHECKPOINT_SIGNING_KEY`` environment variables) into typed settings; no layer below
reads either.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import cloudpickle

from cairn.common import config_options as opts
from cairn.common.exceptions import ConfigurationError, JobSubmissionError
from cairn.common.restart_strategy import restart_settings_from
from cairn.datastream.checkpoint_config import checkpoint_settings_from
from cairn.datastream.ha_config import ha_settings_from
from cairn.datastream.tls_config import security_settings_from
from cairn.graph.job_graph import auto_uid
from cairn.graph.transformations import (
    OneInputTransformation,
    OperatorKind,
    PartitionTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    job_positions,
    reachable,
)
from cairn.settings import (
    DEFAULT_MAX_PARALLELISM,
    SIGNING_KEY_ENV,
    DeploySettings,
    ExecutorKind,
    JobSettings,
    MetricsSettings,
    NetworkSettings,
    RerunPolicy,
    RestoreMode,
    RestSettings,
    RocksDBSettings,
    SigningKey,
    StateBackendKind,
    StateSettings,
)

__all__ = [
    "DEFAULT_JOB_NAME",
    "ContextDefaults",
    "PreparedJob",
    "check_serializable",
    "check_sinks",
    "check_unique_uids",
    "default_max_parallelism",
    "deploy_settings_from",
    "effective_configuration",
    "prepare_job",
    "stateful_without_uid",
]

DEFAULT_JOB_NAME = "Cairn Streaming Job"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContextDefaults:
    """Process-wide overrides set by ``cairn run`` (``-p``, ``-s``, ``-D key=value``)."""

    parallelism: int | None = None
    restore_path: str | None = None
    configuration: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedJob:
    settings: JobSettings
    sinks: tuple[SinkTransformation, ...]
    transformations: tuple[Transformation, ...]  # reachable from the sinks, by id


def effective_configuration(
    env_configuration: Mapping[str, str], context: ContextDefaults
) -> dict[str, str]:
    """The environment's entries overridden by the context (its ``-D`` entries, then its
    parallelism and restore path)."""
    merged = dict(env_configuration)
    merged.update(context.configuration)
    if context.parallelism is not None:
        merged[opts.PARALLELISM.key] = str(context.parallelism)
    if context.restore_path is not None:
        merged[opts.RESTORE_PATH.key] = context.restore_path
    return merged


def prepare_job(
    job_name: str | None,
    env_configuration: Mapping[str, str],
    sinks: Sequence[SinkTransformation],
    storage_options: Mapping[str, Any] | None = None,
    context: ContextDefaults | None = None,
) -> PreparedJob:
    if not sinks:
        raise JobSubmissionError("No operators defined in streaming topology. Cannot execute.")
    merged = effective_configuration(env_configuration, context or ContextDefaults())
    resolved = opts.validate_configuration(merged)

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    transformations = reachable(sinks)
    batch = runs_in_batch(get(opts.RUNTIME_MODE), transformations)
    check_unique_uids(transformations)
    check_no_uid_hash(transformations)
    check_serializable(transformations)

    checkpoint = checkpoint_settings_from(resolved, storage_options)
    if batch and checkpoint.enabled:
        # As Flink: a BATCH job recovers by rerunning stages from their inputs.
        log.info(
            "%s: BATCH takes no checkpoints; the checkpoint configuration is ignored",
            opts.RUNTIME_MODE.key,
        )
        checkpoint = replace(checkpoint, interval_ms=-1)
    if checkpoint.enabled:
        _warn_stateful_without_uid(transformations, job_positions(sinks))
    if checkpoint.signing_key is None:
        checkpoint = replace(checkpoint, signing_key=signing_key_from_environ(os.environ))
    parallelism = default_parallelism(resolved)
    max_parallelism = int(get(opts.MAX_PARALLELISM))
    if max_parallelism == -1:
        widest = max([parallelism, *(t.parallelism or 0 for t in transformations)])
        max_parallelism = default_max_parallelism(widest)
    settings = JobSettings(
        job_name=job_name or get(opts.JOB_NAME) or DEFAULT_JOB_NAME,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        checkpoint=checkpoint,
        restart=restart_settings_from(resolved, checkpoint.enabled),
        buffer_timeout_ms=get(opts.BUFFER_TIMEOUT) if get(opts.BUFFER_TIMEOUT_ENABLED) else -1,
        buffer_linger_ms=int(get(opts.BUFFER_LINGER)),
        auto_watermark_interval_ms=int(get(opts.AUTO_WATERMARK_INTERVAL)),
        configuration={
            k: "<redacted>"
            if opts.is_secret(k)
            else (v if opts.is_passthrough(k) else _recorded(opts.get_option(k), v))
            for k, v in resolved.items()
        },
        restore_path=get(opts.RESTORE_PATH),
        restore_ignore_unclaimed=bool(get(opts.RESTORE_IGNORE_UNCLAIMED)),
        restore_mode=RestoreMode(get(opts.RESTORE_MODE)),
        cluster_id=get(opts.CLUSTER_ID),
        on_rerun=RerunPolicy(get(opts.ON_RERUN)),
        ha=ha_settings_from(resolved, checkpoint),
        security=security_settings_from(resolved),
        batch=batch,
        allow_fallback_past_committed=bool(get(opts.ALLOW_FALLBACK_PAST_COMMITTED)),
        operator_chaining=bool(get(opts.OPERATOR_CHAINING)),
        job_parameters=dict(get(opts.JOB_PARAMETERS) or {}),
        deploy=deploy_settings_from(resolved),
        state=state_settings_from(resolved, os.environ),
        rest=RestSettings(
            enabled=bool(get(opts.REST_ENABLED)),
            address=str(get(opts.REST_ADDRESS)),
            bind_address=str(get(opts.REST_BIND_ADDRESS)),
            port=int(get(opts.REST_PORT)),
            token=bool(get(opts.REST_TOKEN_ENABLED)),
            archive_dir=get(opts.JOB_ARCHIVE_DIR),
            archive_retained=int(get(opts.ARCHIVE_RETAINED_JOBS)),
        ),
        metrics=replace(
            _metrics_settings(
                str(get(opts.METRICS_REPORTERS) or ""),
                str(get(opts.METRICS_PROM_HOST)),
                int(get(opts.METRICS_PROM_PORT)),
            ),
            latency_interval_ms=int(get(opts.METRICS_LATENCY_INTERVAL)),
            latency_granularity=str(get(opts.METRICS_LATENCY_GRANULARITY)),
            latency_history_size=int(get(opts.METRICS_LATENCY_HISTORY_SIZE)),
        ),
        switch_interval_ms=int(get(opts.WORKER_SWITCH_INTERVAL)),
        network=NetworkSettings(
            batch_size=int(get(opts.NETWORK_BATCH_SIZE)),
            min_batch_size=min(
                int(get(opts.NETWORK_MIN_BATCH_SIZE)), int(get(opts.NETWORK_BATCH_SIZE))
            ),
            debloat_enabled=bool(get(opts.DEBLOAT_ENABLED)),
            debloat_target_ms=int(get(opts.DEBLOAT_TARGET)),
            debloat_period_ms=max(1, int(get(opts.DEBLOAT_PERIOD))),
            debloat_samples=int(get(opts.DEBLOAT_SAMPLES)),
            debloat_threshold_percent=int(get(opts.DEBLOAT_THRESHOLD)),
            max_frame_size=int(get(opts.NETWORK_MAX_FRAME_SIZE)),
        ),
    )
    check_sinks(transformations, settings)
    return PreparedJob(settings, tuple(sinks), tuple(transformations))


def check_sinks(transformations: Iterable[Transformation], settings: JobSettings) -> None:
    """Each ``sink_to`` sink's own check of the job's settings (``Sink.check_job``)."""
    from cairn.api.connectors import Sink

    for t in transformations:
        spec = t.operator if isinstance(t, SinkTransformation) else None
        if spec is not None and spec.kind is OperatorKind.SINK:
            sink = spec.function
            if isinstance(sink, Sink):
                sink.check_job(settings)


def _recorded(option: opts.ConfigOption, value: Any) -> str:
    """A value as the job's configuration record keeps it (secrets are not kept)."""
    return "<redacted>" if option.secret else option.format(value)


def signing_key_from_environ(environ: Mapping[str, str]) -> SigningKey | None:
    """The key in ``CAIRN_CHECKPOINT_SIGNING_KEY`` (unset or empty: None).

    Raises:
        ConfigurationError: the variable is set but is not a valid key (value not shown).
    """
    text = environ.get(SIGNING_KEY_ENV, "")
    if not text.strip():
        return None
    try:
        return SigningKey.parse(text)
    except ValueError as e:
        raise ConfigurationError(f"environment variable {SIGNING_KEY_ENV}: {e}") from None


def state_settings_from(resolved: Mapping[str, Any], environ: Mapping[str, str]) -> StateSettings:
    """The state backend of validated configuration (``state.backend.*``), with the heap
    backend's environment overrides.

    >>> state_settings_from({"state.backend.type": "rocksdb"}, {}).backend
    <StateBackendKind.ROCKSDB: 'rocksdb'>
    """

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    env = StateSettings.from_environ(environ)
    backend = StateBackendKind(get(opts.STATE_BACKEND))
    incremental = bool(get(opts.CHECKPOINTING_INCREMENTAL))
    return StateSettings(
        fork_threshold=env.fork_threshold,
        fork_niceness=env.fork_niceness,
        backend=backend,
        incremental=incremental,
        local_recovery=bool(get(opts.LOCAL_RECOVERY)),
        local_recovery_dir=get(opts.LOCAL_RECOVERY_ROOT),
        rocksdb=RocksDBSettings(
            local_dir=get(opts.ROCKSDB_LOCALDIR),
            block_cache_bytes=int(get(opts.ROCKSDB_BLOCK_CACHE)),
            write_buffer_bytes=int(get(opts.ROCKSDB_WRITE_BUFFER_SIZE)),
            write_buffer_count=int(get(opts.ROCKSDB_WRITE_BUFFER_COUNT)),
            transfer_threads=int(get(opts.ROCKSDB_TRANSFER_THREADS)),
        ),
    )


def deploy_settings_from(resolved: Mapping[str, Any]) -> DeploySettings:
    """The deployment settings of validated configuration (``cairn.*`` and ``spark.*`` keys).

    >>> deploy_settings_from({"cairn.executor": "inprocess", "cairn.workers": 2})
    DeploySettings(executor=<ExecutorKind.INPROCESS: 'inprocess'>, workers=2, ...)
    """

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    workers = get(opts.WORKERS)
    return DeploySettings(
        executor=ExecutorKind(get(opts.EXECUTOR)),
        workers=None if workers is None else int(workers),
        spark_master=get(opts.SPARK_MASTER),
        spark_conf={k: str(v) for k, v in resolved.items() if k.startswith("spark.")},
        progress=bool(get(opts.PROGRESS)),
        testing_faults=str(get(opts.TESTING_FAULTS)),
    )


def runs_in_batch(mode: str, transformations: Iterable[Transformation]) -> bool:
    """Whether a job in ``execution.runtime-mode`` ``mode`` runs in BATCH: AUTOMATIC picks
    BATCH when every source is bounded, as Flink does.

    >>> from cairn.graph.transformations import SourceTransformation
    >>> bounded = SourceTransformation("numbers", [], bounded=True)
    >>> endless = SourceTransformation("socket", [], bounded=False)
    >>> runs_in_batch("AUTOMATIC", [bounded]), runs_in_batch("AUTOMATIC", [bounded, endless])
    (True, False)
    """
    if mode != "AUTOMATIC":
        return mode == "BATCH"
    sources = [t for t in transformations if isinstance(t, SourceTransformation)]
    batch = all(t.bounded for t in sources)
    log.info(
        "%s: AUTOMATIC runs %s (%s)",
        opts.RUNTIME_MODE.key,
        "BATCH" if batch else "STREAMING",
        "every source is bounded" if batch else "an unbounded source",
    )
    return batch


def default_parallelism(resolved: Mapping[str, Any]) -> int:
    """``parallelism.default`` of validated configuration; unset, the number of CPU cores on
    embedded local Spark (the default executor without a Spark master or a cluster session),
    as PyFlink's local mode, else 1 (a cluster's own default, or in process).

    >>> default_parallelism({"parallelism.default": 3})
    3
    >>> default_parallelism({"cairn.executor": "inprocess"})
    1
    >>> default_parallelism({}) == (os.cpu_count() or 1)
    True
    """
    if opts.PARALLELISM.key in resolved:
        return int(resolved[opts.PARALLELISM.key])
    if resolved.get(opts.EXECUTOR.key, opts.EXECUTOR.default) != "spark":
        return 1
    master = resolved.get(opts.SPARK_MASTER.key)
    if master is None:
        # An active session is used as it is: local unless it runs on a cluster.
        session = sys.modules.get("pyspark.sql")
        active = session.SparkSession.getActiveSession() if session is not None else None
        master = active.sparkContext.master if active is not None else "local"
    return (os.cpu_count() or 1) if str(master).startswith("local") else 1


def default_max_parallelism(parallelism: int) -> int:
    """Flink's rule: 1.5 x parallelism rounded up to a power of two, within [128, 32768].

    >>> default_max_parallelism(4), default_max_parallelism(100)
    (128, 256)
    """
    target = parallelism + parallelism // 2
    power = 1 << max(0, (target - 1).bit_length())
    return min(max(power, DEFAULT_MAX_PARALLELISM), 1 << 15)


def check_unique_uids(transformations: Iterable[Transformation]) -> None:
    owners: dict[str, Transformation] = {}
    for t in transformations:
        if t.uid is None:
            continue
        first = owners.setdefault(t.uid, t)
        if first is not t:
            raise JobSubmissionError(
                f"Duplicate uid {t.uid!r}: used by operator {first.name!r} (id {first.id}) and "
                f"operator {t.name!r} (id {t.id}). Uids must be unique within a job: state in "
                "checkpoints and savepoints is stored per uid."
            )


def check_no_uid_hash(transformations: Iterable[Transformation]) -> None:
    """``set_uid_hash`` is Flink's override of an operator's hashed JobVertexID; Cairn has no
    hashed ids (state is stored and matched by uid), so a job using it fails here, named."""
    for t in transformations:
        if t.uid_hash is not None:
            raise JobSubmissionError(
                f"set_uid_hash({t.uid_hash!r}) on operator {t.name!r} (id {t.id}) is not "
                "supported: Cairn stores and matches operator state by uid, with no hashed "
                "operator id to override (Flink savepoints do not restore into Cairn anyway). "
                "Remove set_uid_hash() and give the operator .uid(...)."
            )


def stateful_without_uid(transformations: Iterable[Transformation]) -> list[Transformation]:
    """Operators that keep state in checkpoints and savepoints but have no explicit uid:
    sources (their positions), keyed operators, ``sink_to`` sinks (writer state and pending
    commits) and ``CheckpointedFunction``s. Their state is stored under a generated uid that
    changes when the job's operators change, so an upgraded job would not find it.

    >>> from cairn.graph.transformations import SourceTransformation
    >>> src = SourceTransformation("numbers", [], id=3)
    >>> [t.name for t in stateful_without_uid([src])]
    ['numbers']
    >>> src.uid = "numbers"
    >>> stateful_without_uid([src])
    []
    """
    found: list[Transformation] = []
    for t in transformations:
        if t.uid is not None:
            continue
        if isinstance(t, SourceTransformation):
            found.append(t)
        elif isinstance(t, OneInputTransformation) and t.operator is not None:
            spec = t.operator
            checkpointed = callable(getattr(spec.function, "snapshot_state", None))
            if spec.key_selector is not None or spec.kind is OperatorKind.SINK or checkpointed:
                found.append(t)
    return found


def _warn_stateful_without_uid(
    transformations: Iterable[Transformation], positions: Mapping[int, int]
) -> None:
    for t in stateful_without_uid(transformations):
        log.warning(
            "Operator %r (id %d) keeps state but has no uid: its state is saved under the "
            "generated uid %r, which changes when operators are added or removed before it, "
            "so a savepoint would not restore into a changed job. Give it .uid(...).",
            t.name,
            t.id,
            auto_uid(t, positions[t.id]),
        )


def check_serializable(transformations: Iterable[Transformation]) -> None:
    """Every user object (functions, key selectors, sources, sinks) must pickle, because it
    is shipped to the workers; fail here with the operator and the function named."""
    for t in transformations:
        checked: set[int] = set()
        for role, obj in _user_objects(t):
            if id(obj) in checked:
                continue
            checked.add(id(obj))
            try:
                cloudpickle.dumps(obj)
            except Exception as exc:
                uid = f"uid {t.uid!r}" if t.uid is not None else "no uid"
                raise JobSubmissionError(
                    f"The {role} of operator {t.name!r} ({uid}, id {t.id}) cannot be serialized "
                    f"with cloudpickle.\n  {describe_callable(obj)}\n  error: "
                    f"{type(exc).__name__}: {exc}\nUser functions are pickled and shipped to the "
                    "workers: create connections, clients, locks and open files in open(), not "
                    "in __init__ or in variables the function closes over."
                ) from exc


def _user_objects(t: Transformation) -> list[tuple[str, Any]]:
    objects: list[tuple[str, Any]] = []
    if isinstance(t, SourceTransformation) and t.source is not None:
        objects.append(("source", t.source))
    if isinstance(t, OneInputTransformation) and t.operator is not None:
        role = "sink" if isinstance(t, SinkTransformation) else "function"
        if t.operator.function is not None:
            objects.append((role, t.operator.function))
        if t.operator.key_selector is not None:
            objects.append(("key selector", t.operator.key_selector))
    if isinstance(t, PartitionTransformation) and t.key_selector is not None:
        objects.append(("key selector", t.key_selector))
    return objects


def describe_callable(obj: Any) -> str:
    """``"function <qualname> at <file>:<line>"`` or ``"instance of class <qualname> at ..."``."""
    if inspect.ismethod(obj):
        obj = obj.__func__
    if inspect.isfunction(obj) or inspect.isclass(obj):
        what, target = ("function" if inspect.isfunction(obj) else "class"), obj
    else:
        what, target = "instance of class", type(obj)
    qualname = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"
    return f"{what} {qualname} at {_location(target)}"


def _location(target: Any) -> str:
    try:
        source_file = inspect.getsourcefile(target) or inspect.getfile(target)
        return f"{source_file}:{inspect.getsourcelines(target)[1]}"
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        if code is not None:
            return f"{code.co_filename}:{code.co_firstlineno}"
        return "<unknown location>"


def _metrics_settings(reporters: str, host: str, port: int) -> MetricsSettings:
    """``metrics.reporters`` → settings; an unknown reporter is an error, not ignored.

    >>> _metrics_settings("prom", "127.0.0.1", 0).prometheus
    True
    >>> _metrics_settings("jmx", "127.0.0.1", 0)
    Traceback (most recent call last):
    ...
    ValueError: metrics.reporters: unknown reporter 'jmx'; Cairn has 'prom' (Prometheus)
    """
    names = [n.strip() for n in reporters.split(",") if n.strip()]
    for name in names:
        if name != "prom":
            raise ValueError(
                f"metrics.reporters: unknown reporter {name!r}; Cairn has 'prom' (Prometheus)"
            )
    return MetricsSettings(prometheus=bool(names), host=host, port=port)
