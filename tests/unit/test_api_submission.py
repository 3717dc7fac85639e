"""Validation before submission: topology, uids, serializability, settings, CLI context."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.common import (
    ConfigurationError,
    JobExecutionResult,
    JobStatus,
    JobSubmissionError,
    Types,
)
from cairn.common.execution_config import global_job_parameters
from cairn.datastream import (
    CheckpointingMode,
    CloseableIterator,
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    MapFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from cairn.datastream.stream_execution_environment import (
    get_context_defaults,
    reset_context_defaults,
    set_context_defaults,
)
from cairn.ids import JobId
from cairn.settings import RocksDBSettings, StateBackendKind
from cairn.state.rocksdb.db import DEFAULT_BLOCK_CACHE_BYTES


@pytest.fixture(autouse=True)
def _clean_context() -> Iterator[None]:
    reset_context_defaults()
    yield
    reset_context_defaults()


class LockedMap(MapFunction):
    def __init__(self) -> None:
        self.lock = threading.Lock()  # belongs in open(): locks do not pickle

    def map(self, value: Any) -> Any:
        return value


def test_job_without_sink_is_rejected_like_flink() -> None:
    env = StreamExecutionEnvironment()
    env.from_collection([1]).map(lambda x: x)
    with pytest.raises(JobSubmissionError, match=r"^No operators defined in streaming topology"):
        env.execute()


def test_duplicate_uid_names_both_operators() -> None:
    env = StreamExecutionEnvironment()
    src = env.from_collection([1])
    src.map(lambda x: x).name("first").uid("same").print()
    src.filter(lambda x: True).name("second").uid("same").print()
    with pytest.raises(JobSubmissionError) as info:
        env.execute()
    message = str(info.value)
    assert "Duplicate uid 'same'" in message
    assert "operator 'first'" in message and "operator 'second'" in message


def test_unserializable_function_names_operator_function_and_error() -> None:
    env = StreamExecutionEnvironment()
    env.from_collection([1]).map(LockedMap()).name("enrich").uid("enrich-uid").print()
    with pytest.raises(JobSubmissionError) as info:
        env.execute()
    message = str(info.value)
    assert "The function of operator 'enrich' (uid 'enrich-uid'" in message
    line = LockedMap.__init__.__code__.co_firstlineno - 1  # the class statement
    assert f"instance of class {__name__}.LockedMap at {__file__}:{line}" in message
    assert "_thread.lock" in message
    assert isinstance(info.value.__cause__, Exception)


def test_unserializable_lambda_and_key_selector_are_located() -> None:
    lock = threading.Lock()
    env = StreamExecutionEnvironment()
    env.from_collection([1]).key_by(lambda x: (lock, x)[1]).print()
    with pytest.raises(JobSubmissionError) as info:
        env.prepare_job()
    message = str(info.value)
    assert "The key selector of operator 'KeyBy' (no uid" in message
    assert "function " in message and ".<lambda> at " + __file__ in message


def test_unserializable_collection_element() -> None:
    env = StreamExecutionEnvironment()
    env.from_collection([threading.Lock()]).print()
    with pytest.raises(JobSubmissionError, match="The source of operator 'Collection Source'"):
        env.prepare_job()


def test_rocksdb_backend_is_selected_in_the_typed_settings() -> None:
    env = StreamExecutionEnvironment()
    env.set_state_backend(EmbeddedRocksDBStateBackend(True))  # seed 002's line
    assert env.get_state_backend().is_incremental_checkpoints_enabled()  # type: ignore[attr-defined]
    env.from_collection([1]).print()
    state = env.prepare_job().settings.state
    assert state.backend is StateBackendKind.ROCKSDB and state.incremental
    assert state.rocksdb == RocksDBSettings()  # 64 MB cache, Flink's 2 x 64 MB buffers
    # the option's, the settings' and the database's defaults are one
    assert RocksDBSettings().block_cache_bytes == DEFAULT_BLOCK_CACHE_BYTES == 64 << 20
    env.configure(
        {
            "state.backend.rocksdb.localdir": "/data/rocks",
            "state.backend.rocksdb.block.cache-size": "16 mb",
            "state.backend.rocksdb.writebuffer.size": "4mb",
            "state.backend.rocksdb.writebuffer.count": "3",
        }
    )
    assert env.prepare_job().settings.state.rocksdb == RocksDBSettings(
        "/data/rocks", 16 << 20, 4 << 20, 3
    )
    env.set_state_backend(HashMapStateBackend())
    settings = env.prepare_job().settings
    assert settings.configuration["state.backend.type"] == "hashmap"
    assert settings.state.backend is StateBackendKind.HASHMAP


def test_unknown_state_backend_and_bad_rocksdb_sizes_fail_at_submission() -> None:
    for conf, message in [
        ({"state.backend.type": "leveldb"}, "state.backend.type.*expected one of"),
        ({"state.backend.rocksdb.writebuffer.size": "lots"}, "memory size"),
        ({"state.backend.rocksdb.writebuffer.count": "0"}, "at least 1"),
    ]:
        env = StreamExecutionEnvironment()
        env.from_collection([1]).print()
        with pytest.raises(ConfigurationError, match=message):
            env.configure(conf)
            env.prepare_job()


def test_batch_mode_ignores_checkpointing_and_streaming_keeps_it() -> None:
    env = StreamExecutionEnvironment().enable_checkpointing(1000)
    env.from_collection([1]).print()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    streaming = env.prepare_job().settings
    assert not streaming.batch and streaming.checkpoint.enabled
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    batch = env.prepare_job().settings
    assert batch.batch and not batch.checkpoint.enabled


def test_unaligned_with_at_least_once_fails_at_submission() -> None:
    env = StreamExecutionEnvironment().enable_checkpointing(100, CheckpointingMode.AT_LEAST_ONCE)
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.from_collection([1]).print()
    with pytest.raises(ConfigurationError, match="unaligned checkpoints require"):
        env.execute()


def test_job_settings_from_environment() -> None:
    env = StreamExecutionEnvironment()
    env.set_parallelism(3).set_buffer_timeout(-1).enable_checkpointing(500)
    env.get_config().set_global_job_parameters({"threshold": "5"})
    env.configure({"spark.executor.memory": "1g", "cairn.executor": "inprocess"})
    env.from_collection([1]).map(lambda x: x).set_parallelism(100).print()
    settings = env.prepare_job("my job").settings
    assert (settings.job_name, settings.parallelism, settings.buffer_timeout_ms) == (
        "my job",
        3,
        -1,
    )
    assert settings.max_parallelism == 256  # Flink's rule, from the widest operator
    assert settings.checkpoint.interval_ms == 500
    assert settings.configuration["spark.executor.memory"] == "1g"
    assert settings.configuration["cairn.executor"] == "inprocess"
    assert global_job_parameters(settings.configuration) == {"threshold": "5"}
    assert settings.restore_path is None


def test_job_name_and_max_parallelism_sources() -> None:
    env = StreamExecutionEnvironment({"pipeline.name": "from-config"})
    env.set_max_parallelism(16)
    env.from_collection([1]).print()
    settings = env.prepare_job().settings
    assert (settings.job_name, settings.max_parallelism) == ("from-config", 16)
    env2 = StreamExecutionEnvironment()
    env2.from_collection([1]).print()
    assert env2.prepare_job().settings.job_name == "Cairn Streaming Job"


def test_context_defaults_override_the_script_at_execute_time() -> None:
    env = StreamExecutionEnvironment()
    env.set_parallelism(1).enable_checkpointing(60_000)
    env.from_collection([1]).map(lambda x: x).print()
    set_context_defaults(
        parallelism=4,
        restore_path="file:///tmp/ckpt/chk-3",
        configuration={"execution.checkpointing.interval": "5 s", "cairn.executor": "inprocess"},
    )
    assert env.get_parallelism() == 4 and env.get_checkpoint_interval() == 5_000
    settings = env.prepare_job().settings
    assert (settings.parallelism, settings.checkpoint.interval_ms) == (4, 5_000)
    assert settings.restore_path == "file:///tmp/ckpt/chk-3"
    assert settings.configuration["cairn.executor"] == "inprocess"
    reset_context_defaults()
    assert env.prepare_job().settings.parallelism == 1


def test_context_defaults_are_validated_when_set() -> None:
    with pytest.raises(ConfigurationError, match=r"did you mean 'cairn\.executor'"):
        set_context_defaults(configuration={"cairn.executer": "spark"})
    with pytest.raises(ConfigurationError, match="parallelism must be at least 1"):
        set_context_defaults(parallelism=0)
    set_context_defaults(configuration={"state.checkpoints.dir": "/tmp/x"})
    assert dict(get_context_defaults().configuration) == {"execution.checkpointing.dir": "/tmp/x"}


def test_execute_and_collect_validates_limit_before_running() -> None:
    env = StreamExecutionEnvironment()
    with pytest.raises(ValueError, match="Limit must be greater than 0"):
        env.from_collection([1]).execute_and_collect(limit=0)
    assert env._sinks == []


class _Client:
    """Stands in for the deploy layer's JobClient (status and cancel only)."""

    def __init__(self, status: JobStatus) -> None:
        self.status, self.cancelled = status, False

    def get_job_status(self) -> JobStatus:
        return self.status

    def cancel(self) -> None:
        self.cancelled = True


def test_closeable_iterator_cancels_a_running_job_once() -> None:
    client = _Client(JobStatus.RUNNING)
    with CloseableIterator(iter([1, 2, 3]), client) as it:
        assert next(it) == 1 and it.next() == 2
    assert client.cancelled
    assert list(it) == []
    finished = _Client(JobStatus.FINISHED)
    it = CloseableIterator(iter([1]), finished)
    assert list(it) == [1]
    it.close()
    assert not finished.cancelled


def test_job_status_and_result() -> None:
    assert JobStatus.CANCELED.is_globally_terminal_state()
    assert JobStatus.SUSPENDED.is_terminal_state()
    assert not JobStatus.SUSPENDED.is_globally_terminal_state()
    assert not JobStatus.RESTARTING.is_terminal_state()
    result = JobExecutionResult(JobId("ab"), 10, {"n": 1})
    assert result.get_job_execution_result() is result
    assert result.get_all_accumulator_results() == {"n": 1}


def test_type_hints_are_plain_values() -> None:
    row = Types.ROW_NAMED(["a"], [Types.INT()])
    assert row.get_field_index("a") == 0 and row.get_field_index("z") == -1
    assert str(Types.MAP(Types.STRING(), Types.LIST(Types.LONG()))) == "Map<String, List<Long>>"
    with pytest.raises(ValueError):
        Types.ROW_NAMED(["a", "b"], [Types.INT()])


def test_a_stateful_operator_without_uid_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = StreamExecutionEnvironment()
    env.enable_checkpointing(1000)
    (
        env.from_collection([1, 2])
        .uid("numbers")
        .key_by(lambda x: x % 2)
        .reduce(lambda a, b: a + b)
        .name("sums")
        .map(lambda x: x)
        .print()
    )
    with caplog.at_level("WARNING", logger="cairn.datastream.job_builder"):
        env.prepare_job()
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned  # the keyed reduce; not the uid'd source, map or print
    assert "Operator 'sums'" in warned[0] and "Give it .uid(...)" in warned[0]


def test_savepoint_and_control_endpoint_options_become_typed_settings() -> None:
    from cairn.settings import RestoreMode, RestSettings

    env = StreamExecutionEnvironment()
    env.enable_checkpointing(1000)
    set_context_defaults(
        configuration={
            "execution.savepoint-restore-mode": "claim",
            "state.savepoints.dir": "/sp",
            "rest.port": "8089",
            "rest.bind-address": "0.0.0.0",
            "cairn.rest.token.enabled": "false",
        }
    )
    env.from_collection([1]).uid("src").print()
    settings = env.prepare_job().settings
    assert settings.restore_mode is RestoreMode.CLAIM
    assert settings.checkpoint.savepoint_dir == "file:///sp"
    assert settings.rest == RestSettings(bind_address="0.0.0.0", port=8089, token=False)
    with pytest.raises(ConfigurationError, match=r"rest\.port must be between 0 and 65535"):
        set_context_defaults(configuration={"rest.port": "70000"})
