"""``StreamExecutionEnvironment``: where a job is defined, configured and submitted.

Invariant: the environment holds only the configuration the script set (canonical keys,
validated when set) and the sinks added so far; defaults live in ``cairn.common.config_options``
and the process-wide context of ``cairn run`` (``set_context_defaults``) overrides both at
execute time. ``execute``/``execute_async`` validate the whole job on the driver
(``job_builder.prepare_job``) before anything is deployed, then clear the sinks, as Flink does.

>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> _ = env.enable_checkpointing(60_000)
>>> env.get_checkpoint_config().get_checkpoint_interval()
60000
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cairn.api.connectors import Source
from cairn.api.functions import SourceFunction
from cairn.common import config_options as opts
from cairn.common.arguments import require_int
from cairn.common.checkpointing_mode import CheckpointingMode
from cairn.common.configuration import Configuration
from cairn.common.execution_config import ExecutionConfig
from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.restart_strategy import RestartStrategyConfiguration
from cairn.common.type_conversion import convert_elements
from cairn.common.typeinfo import TypeInformation
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.checkpoint_config import CheckpointConfig
from cairn.datastream.connectors.collection import CollectionSource
from cairn.datastream.data_stream import DataStream
from cairn.datastream.execution_mode import RuntimeExecutionMode
from cairn.datastream.job_builder import ContextDefaults, PreparedJob, prepare_job
from cairn.datastream.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from cairn.graph.transformations import SinkTransformation, SourceTransformation

if TYPE_CHECKING:
    from cairn.common.job_client import JobClient

__all__ = [
    "StreamExecutionEnvironment",
    "get_context_defaults",
    "reset_context_defaults",
    "set_context_defaults",
    "set_submission_hook",
]

_context = ContextDefaults()
_submission_hook: Callable[[PreparedJob], PreparedJob] | None = None
_log = logging.getLogger(__name__)
_jars_noted = False


def _no_jars_needed(method: str, paths: Iterable[str]) -> None:
    global _jars_noted
    if not _jars_noted:  # once per process: scripts call it once per job, or per jar
        _jars_noted = True
        _log.info(
            "%s(%s) ignored: Cairn needs no jars (its connectors and formats are Python)",
            method,
            ", ".join(map(repr, paths)),
        )


def set_context_defaults(
    parallelism: int | None = None,
    restore_path: str | None = None,
    configuration: Configuration | Mapping[str, Any] | None = None,
) -> None:
    """Set the overrides ``cairn run`` passes to the script it runs (``-p``, ``-s``, ``-D``).

    They apply to every environment of this process at execute time and win over what the
    script set: the default parallelism (operators with an explicit ``set_parallelism`` keep
    theirs), the state to restore from, and each given configuration key. Calling it again
    replaces all of them; values are validated here.
    """
    global _context
    if parallelism is not None:
        opts.parse_value(opts.PARALLELISM.key, parallelism)
    if restore_path is not None:
        opts.parse_value(opts.RESTORE_PATH.key, restore_path)
    _context = ContextDefaults(parallelism, restore_path, _canonical_entries(configuration or {}))


def set_submission_hook(hook: Callable[[PreparedJob], PreparedJob] | None) -> None:
    """Let ``hook`` see (and replace) every job this process submits, once it is validated
    and before it is deployed; ``None`` removes it (Cairn extension, for ``cairn chaos``,
    which reads what each sink is and points file sinks at a directory of its own).

    >>> set_submission_hook(lambda prepared: prepared)
    >>> set_submission_hook(None)
    """
    global _submission_hook
    _submission_hook = hook


def get_context_defaults() -> ContextDefaults:
    return _context


def reset_context_defaults() -> None:
    set_context_defaults()


def _canonical_entries(configuration: Configuration | Mapping[str, Any]) -> dict[str, str]:
    """Validated ``canonical key -> text``; a current key wins over its deprecated alias."""
    items = configuration.to_dict() if isinstance(configuration, Configuration) else configuration
    entries: dict[str, str] = {}
    current: set[str] = set()
    for key, value in dict(items).items():
        canonical, text = opts.format_value(key, value)
        if canonical in current and key != canonical:
            continue
        entries[canonical] = text
        if key == canonical:
            current.add(canonical)
    return entries


class StreamExecutionEnvironment:
    """The context in which a streaming job is defined and executed."""

    def __init__(self, configuration: Configuration | Mapping[str, Any] | None = None) -> None:
        self._configuration = Configuration()
        self._checkpoint_config = CheckpointConfig(self._configuration)
        self._execution_config = ExecutionConfig(self._configuration)
        self._sinks: list[SinkTransformation] = []
        if configuration is not None:
            self.configure(configuration)

    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None,
    ) -> StreamExecutionEnvironment:
        """A new environment, optionally starting from ``configuration`` (validated)."""
        return StreamExecutionEnvironment(configuration)

    # -- configuration -----------------------------------------------------------------------

    def configure(
        self, configuration: Configuration | Mapping[str, Any]
    ) -> StreamExecutionEnvironment:
        """Apply configuration entries (Flink keys; ``spark.*`` passes through). Unknown keys
        and invalid values raise ``ConfigurationError`` and leave the environment unchanged."""
        for key, text in _canonical_entries(configuration).items():
            self._configuration.set_string(key, text)
        return self

    def get_configuration(self) -> Configuration:
        """The entries set on this environment (Flink's ``getConfiguration``): the live
        configuration, so a table config can put back what a ``SET`` replaced (``RESET``)."""
        return self._configuration

    def _set(self, option: opts.ConfigOption, value: Any) -> StreamExecutionEnvironment:
        self._configuration.set_string(*opts.format_value(option.key, value))
        return self

    def _effective(self, option: opts.ConfigOption) -> Any:
        from cairn.datastream.job_builder import effective_configuration

        merged = effective_configuration(self._configuration.to_dict(), _context)
        raw = merged.get(option.key)
        return option.default if raw is None else opts.parse_value(option.key, raw)[1]

    def get_config(self) -> ExecutionConfig:
        return self._execution_config

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """Default parallelism of operators without their own (``parallelism.default``;
        unset: the number of CPU cores on embedded local Spark, as PyFlink's local mode).

        An ``int`` (a string raises ``TypeError``; configuration entries take text)."""
        return self._set(opts.PARALLELISM, require_int("parallelism", parallelism))

    def get_parallelism(self) -> int:
        """The default parallelism, including ``cairn run -p`` when given; unset, the number
        of CPU cores on embedded local Spark (PyFlink's local mode), else 1."""
        from cairn.datastream.job_builder import default_parallelism, effective_configuration

        merged = effective_configuration(self._configuration.to_dict(), _context)
        return default_parallelism(opts.validate_configuration(merged))

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """Number of key groups (upper bound of rescaling); keep it stable across restores."""
        return self._set(opts.MAX_PARALLELISM, require_int("max parallelism", max_parallelism))

    def get_max_parallelism(self) -> int:
        """-1 when derived from the parallelism at submission (at least 128)."""
        return int(self._effective(opts.MAX_PARALLELISM))

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        """Flush partially filled network buffers after this long; 0 flushes after every
        record, -1 only when full."""
        if timeout_millis == -1:
            return self._set(opts.BUFFER_TIMEOUT_ENABLED, False)
        self._set(opts.BUFFER_TIMEOUT, timeout_millis)
        return self._set(opts.BUFFER_TIMEOUT_ENABLED, True)

    def get_buffer_timeout(self) -> int:
        if not self._effective(opts.BUFFER_TIMEOUT_ENABLED):
            return -1
        return int(self._effective(opts.BUFFER_TIMEOUT))

    def enable_checkpointing(
        self, interval: int, mode: CheckpointingMode | None = None
    ) -> StreamExecutionEnvironment:
        """Checkpoint every ``interval`` milliseconds (at least 10), exactly-once by default."""
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_interval(self) -> int:
        """Milliseconds between checkpoints, -1 when disabled."""
        interval = self._effective(opts.CHECKPOINTING_INTERVAL)
        return -1 if interval is None else int(interval)

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode[self._effective(opts.CHECKPOINTING_MODE)]

    def set_restart_strategy(
        self, restart_strategy_configuration: RestartStrategyConfiguration
    ) -> StreamExecutionEnvironment:
        """Replace every ``restart-strategy.*`` entry by those of the given strategy."""
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError(
                "expected a RestartStrategyConfiguration (RestartStrategies.fixed_delay_restart"
                f"(...) etc.), got {restart_strategy_configuration!r}"
            )
        for key in list(self._configuration.key_set()):
            if key.startswith("restart-strategy."):
                self._configuration.remove_config(key)
        return self.configure(restart_strategy_configuration.to_configuration())

    def set_state_backend(self, state_backend: StateBackend) -> StreamExecutionEnvironment:
        """``HashMapStateBackend()`` (the default) or ``EmbeddedRocksDBStateBackend(...)``;
        the same as setting ``state.backend.type`` (and
        ``execution.checkpointing.incremental``)."""
        if not isinstance(state_backend, StateBackend):
            raise TypeError(f"expected a StateBackend, got {state_backend!r}")
        self._configuration.remove_config(opts.CHECKPOINTING_INCREMENTAL.key)
        return self.configure(state_backend.to_configuration())

    def get_state_backend(self) -> StateBackend:
        if self._effective(opts.STATE_BACKEND) == "rocksdb":
            return EmbeddedRocksDBStateBackend(
                bool(self._effective(opts.CHECKPOINTING_INCREMENTAL))
            )
        return HashMapStateBackend()

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        """STREAMING (the default), BATCH (a bounded job run stage by stage: keyed operators
        fed key by key, no checkpoints) or AUTOMATIC (BATCH when every source of the job is
        bounded, else STREAMING, as in Flink)."""
        return self._set(opts.RUNTIME_MODE, execution_mode)

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        return self._set(opts.OPERATOR_CHAINING, False)

    def is_chaining_enabled(self) -> bool:
        return bool(self._effective(opts.OPERATOR_CHAINING))

    # -- sources -----------------------------------------------------------------------------

    def _source(self, t: SourceTransformation, non_parallel: bool) -> DataStream:
        return DataStream(t, self, non_parallel=non_parallel)

    def from_collection(
        self, collection: Iterable[Any], type_info: TypeInformation | None = None
    ) -> DataStream:
        """A bounded, non-parallel source of the given elements, in order (exactly-once: the
        position is checkpointed). Elements must pickle. With ``type_info`` the elements are
        converted as PyFlink does (``Types.ROW``/``ROW_NAMED``: ``Row``s with the type's field
        names; ``Types.TUPLE``: tuples...), and one that does not fit fails here, by index.

        >>> from cairn.common import Types
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_collection([("a", 1)], Types.ROW([Types.STRING(), Types.INT()])).get_type()
        RowTypeInfo(f0: String, f1: Integer)
        """
        if type_info is not None:
            collection = convert_elements(collection, type_info)
        source = CollectionSource(collection)
        t = SourceTransformation(
            name="Collection Source",
            inputs=[],
            parallelism=1,
            parallelism_fixed=True,
            output_type=type_info,
            source=source,
            bounded=True,
        )
        return self._source(t, non_parallel=True)

    def add_source(
        self,
        source_func: SourceFunction,
        source_name: str = "Custom Source",
        type_info: TypeInformation | None = None,
    ) -> DataStream:
        """A legacy ``SourceFunction`` (``run(ctx)``/``cancel()``): non-parallel; treated as
        unbounded (the job ends when ``run`` returns). A ``FlinkKafkaConsumer`` runs as the
        ``KafkaSource`` it describes (parallel, offsets checkpointed)."""
        to_source = getattr(source_func, "to_source", None)
        if callable(to_source):
            strategy = getattr(source_func, "watermark_strategy", None)
            return self.from_source(
                to_source(), strategy or WatermarkStrategy.no_watermarks(), source_name, type_info
            )
        if not (
            callable(getattr(source_func, "run", None))
            and callable(getattr(source_func, "cancel", None))
        ):
            raise TypeError(
                f"add_source() needs a SourceFunction with run(ctx) and cancel(), got "
                f"{type(source_func).__name__} (use from_source() for a Source)"
            )
        t = SourceTransformation(
            name=source_name,
            inputs=[],
            parallelism=1,
            parallelism_fixed=True,
            output_type=type_info,
            source=source_func,
            bounded=False,
        )
        return self._source(t, non_parallel=True)

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy,
        source_name: str,
        type_info: TypeInformation | None = None,
    ) -> DataStream:
        """A ``Source`` (``FileSource``, ``NumberSequenceSource``...), parallel. Each subtask
        runs ``watermark_strategy`` over the records it reads (``no_watermarks()``: no
        timestamps, no watermarks but the final one at end of input)."""
        if not isinstance(source, Source):
            raise TypeError(
                f"from_source() needs a cairn.datastream.connectors Source, got "
                f"{type(source).__name__} (use add_source() for a SourceFunction)"
            )
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                "from_source() needs a WatermarkStrategy, e.g. WatermarkStrategy.no_watermarks()"
            )
        t = SourceTransformation(
            name=source_name,
            inputs=[],
            output_type=type_info,
            source=source,
            bounded=bool(source.is_bounded()),
            watermark_strategy=watermark_strategy,
        )
        return self._source(t, non_parallel=False)

    def create_input(
        self, input_format: Any, type_info: TypeInformation | None = None
    ) -> DataStream:
        """The records of an input format's file(s) (PyFlink: ``AvroInputFormat(path,
        schema)``), bounded, read as a ``FileSource`` of that format."""
        # Imported here: pyarrow and fsspec load only for jobs that read files.
        from cairn.datastream.connectors.file_source import FileSource
        from cairn.datastream.connectors.formats import BulkFormat

        path = getattr(input_format, "path", None)
        if not isinstance(input_format, BulkFormat) or path is None:
            raise TypeError(
                f"create_input() needs an input format with a path (AvroInputFormat), got "
                f"{type(input_format).__name__}"
            )
        source = FileSource.for_bulk_file_format(input_format, path).build()
        return self.from_source(
            source, WatermarkStrategy.no_watermarks(), type(input_format).__name__, type_info
        )

    def add_jars(self, *jars_path: str) -> None:
        """Accepted and ignored: Cairn's connectors and formats are Python (no JVM jars)."""
        _no_jars_needed("add_jars", jars_path)

    def add_classpaths(self, *classpaths: str) -> None:
        """Accepted and ignored, as :meth:`add_jars`."""
        _no_jars_needed("add_classpaths", classpaths)

    def add_sink_transformation(self, sink: SinkTransformation) -> None:
        """Add a sink to the job ``execute`` submits (Cairn extension, for
        ``DataStream.add_sink`` and its kin)."""
        self._sinks.append(sink)

    # -- execution ---------------------------------------------------------------------------

    def prepare_job(self, job_name: str | None = None) -> PreparedJob:
        """Validate the job and build its settings without submitting it (Cairn extension;
        ``execute`` calls it). Raises ``JobSubmissionError``/``ConfigurationError``."""
        return prepare_job(
            job_name,
            self._configuration.to_dict(),
            self._sinks,
            self._checkpoint_config.get_storage_options(),
            _context,
        )

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Submit the job and return at once with a ``JobClient``."""
        prepared = self.prepare_job(job_name)  # fail on the driver before touching Spark
        if _submission_hook is not None:
            prepared = _submission_hook(prepared)
        from cairn.launch import submit_job

        client = submit_job(prepared.settings, list(prepared.sinks))
        self._sinks.clear()
        return client

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Run the job and wait for it; raises ``JobExecutionException`` if it fails."""
        result: JobExecutionResult = self.execute_async(job_name).get_job_execution_result()
        return result

    def close(self) -> None:
        """Forget the sinks added so far (nothing else is held)."""
        self._sinks.clear()

    def __repr__(self) -> str:
        return f"<cairn StreamExecutionEnvironment sinks={len(self._sinks)}>"
