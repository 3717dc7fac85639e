"""CheckpointConfig: the seed's configuration block, Flink's validation rules, settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cairn.common import CheckpointingMode, Configuration, ConfigurationError, Duration
from cairn.common import config_options as opts
from cairn.datastream import (
    CheckpointConfig,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    StreamExecutionEnvironment,
)
from cairn.events import AlignmentMode
from cairn.settings import CheckpointSettings, RetentionPolicy


def test_seed_002_configuration_block() -> None:
    # Section 4-5 of seed 002, with ``pyflink`` replaced by ``cairn``.
    env = StreamExecutionEnvironment.get_execution_environment()

    env.enable_checkpointing(60000)
    config = env.get_checkpoint_config()
    config.set_checkpointing_mode(CheckpointingMode.EXACTLY_ONCE)
    config.set_min_pause_between_checkpoints(30000)
    config.set_checkpoint_timeout(120000)
    config.set_max_concurrent_checkpoints(1)
    config.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)

    config.set_checkpoint_storage("file:///tmp/flink_checkpoints")

    assert config.to_settings() == CheckpointSettings(
        interval_ms=60_000,
        mode=AlignmentMode.ALIGNED,
        timeout_ms=120_000,
        min_pause_ms=30_000,
        max_concurrent=1,
        tolerable_failures=0,
        retained=1,
        retention=RetentionPolicy.RETAIN_ON_CANCELLATION,
        storage_url="file:///tmp/flink_checkpoints",
        unaligned=False,
        aligned_timeout_ms=0,
    )
    env.from_collection([1]).print()
    assert env.prepare_job().settings.checkpoint == config.to_settings()


def test_defaults_match_flink() -> None:
    config = CheckpointConfig()
    assert not config.is_checkpointing_enabled()
    assert config.get_checkpoint_interval() == -1
    assert config.get_checkpointing_mode() is CheckpointConfig.DEFAULT_MODE
    assert config.get_checkpoint_timeout() == CheckpointConfig.DEFAULT_TIMEOUT == 600_000
    assert config.get_min_pause_between_checkpoints() == 0
    assert config.get_max_concurrent_checkpoints() == 1
    assert config.get_tolerable_checkpoint_failure_number() == 0
    assert config.get_number_of_retained_checkpoints() == 1
    assert not config.is_externalized_checkpoints_enabled()
    assert not config.is_unaligned_checkpoints_enabled()
    assert config.get_checkpoint_storage() is None
    settings = config.to_settings()
    assert not settings.enabled and settings.storage_url is None


def test_at_least_once_maps_to_barrier_tracking() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1_000, CheckpointingMode.AT_LEAST_ONCE)
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert env.get_checkpoint_config().to_settings().mode is AlignmentMode.AT_LEAST_ONCE


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda c: c.set_checkpoint_interval(9), "checkpoint interval must be at least 10"),
        (lambda c: c.set_checkpoint_timeout(5), "checkpoint timeout must be at least 10"),
        (lambda c: c.set_min_pause_between_checkpoints(-1), "must not be negative"),
        (
            lambda c: c.set_max_concurrent_checkpoints(0),
            "concurrent checkpoints must be at least 1",
        ),
        (lambda c: c.set_tolerable_checkpoint_failure_number(-1), "must be at least 0"),
        (
            lambda c: c.set_number_of_retained_checkpoints(0),
            "retained checkpoints must be at least 1",
        ),
    ],
)
def test_setters_validate_with_flinks_rules(
    call: Callable[[CheckpointConfig], object], fragment: str
) -> None:
    config = CheckpointConfig()
    with pytest.raises(ConfigurationError, match=fragment):
        call(config)
    assert config._conf.to_dict() == {}  # a rejected value is not stored


def test_type_errors_for_wrong_enums() -> None:
    config = CheckpointConfig()
    with pytest.raises(TypeError):
        config.set_checkpointing_mode("EXACTLY_ONCE")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        config.set_externalized_checkpoint_retention(1)  # type: ignore[arg-type]


def test_durations_are_accepted_where_milliseconds_are() -> None:
    config = CheckpointConfig().set_checkpoint_interval(Duration.of_seconds(5))
    config.set_aligned_checkpoint_timeout(Duration.of_millis(250))
    assert config.get_checkpoint_interval() == 5_000
    assert config.get_aligned_checkpoint_timeout() == Duration.of_millis(250)
    assert config.get_alignment_timeout() == Duration.of_millis(250)


def test_retention_names() -> None:
    config = CheckpointConfig()
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION
    )
    assert config.is_externalized_checkpoints_enabled()
    assert (
        config.get_externalized_checkpoint_cleanup()
        is ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION
    )
    assert config.to_settings().retention is RetentionPolicy.DELETE_ON_CANCELLATION


def test_storage_variants(tmp_path: Path) -> None:
    config = CheckpointConfig()
    config.set_checkpoint_storage(str(tmp_path / "ckpt"))
    assert config.to_settings().storage_url == "file://" + str(tmp_path / "ckpt")
    assert config.get_checkpoint_storage() == FileSystemCheckpointStorage(str(tmp_path / "ckpt"))

    config.set_checkpoint_storage(
        FileSystemCheckpointStorage("memory://ckpt", storage_options={"a": 1})
    )
    settings = config.to_settings()
    assert (settings.storage_url, dict(settings.storage_options)) == ("memory://ckpt", {"a": 1})

    config.set_checkpoint_storage(JobManagerCheckpointStorage())
    assert config.to_settings().storage_url is None
    assert isinstance(config.get_checkpoint_storage(), JobManagerCheckpointStorage)

    config.set_checkpoint_storage_dir("relative-dir")
    assert config.to_settings().storage_url == "file://" + os.path.abspath("relative-dir")
    with pytest.raises(TypeError):
        config.set_checkpoint_storage(42)  # type: ignore[arg-type]


def test_storage_from_configuration_keys() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("state.checkpoints.dir", "s3://bucket/ckpt")
    )
    assert env.get_checkpoint_config().to_settings().storage_url == "s3://bucket/ckpt"


def test_unaligned_settings() -> None:
    config = CheckpointConfig().set_checkpoint_interval(1_000)
    config.enable_unaligned_checkpoints().set_aligned_checkpoint_timeout(Duration.of_seconds(2))
    settings = config.to_settings()
    assert settings.unaligned and settings.aligned_timeout_ms == 2_000
    assert settings.mode is AlignmentMode.ALIGNED
    config.disable_unaligned_checkpoints()
    assert not config.is_unaligned_checkpoints_enabled()


def test_unaligned_requires_exactly_once() -> None:
    config = CheckpointConfig().set_checkpoint_interval(1_000).enable_unaligned_checkpoints()
    config.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)  # accepted here...
    with pytest.raises(ConfigurationError, match=r"unaligned checkpoints require .*EXACTLY_ONCE"):
        config.to_settings()  # ...rejected when the job's settings are built


def test_fail_on_checkpointing_errors_is_tolerable_failures() -> None:
    config = CheckpointConfig().set_fail_on_checkpointing_errors(False)
    assert config.get_tolerable_checkpoint_failure_number() == 2**31 - 1
    assert not config.is_fail_on_checkpointing_errors()


@pytest.mark.parametrize("url", ["foo://bucket/checkpoints", "simplecache::nope://b/c"])
def test_unknown_storage_schemes_are_refused_where_they_are_set(url: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ConfigurationError, match="unknown filesystem scheme"):
        env.get_checkpoint_config().set_checkpoint_storage(url)
    with pytest.raises(ConfigurationError, match="unknown filesystem scheme"):
        opts.format_value("execution.checkpointing.dir", url)
    env.get_checkpoint_config().set_checkpoint_storage("memory://cairn/checkpoints")


@pytest.mark.parametrize("key", ["execution.state-recovery.path", "execution.savepoint.path"])
def test_an_unknown_scheme_in_the_restore_path_is_refused_at_submission(key: str) -> None:
    """It used to be accepted and fail in the job master ("Protocol not known: foo")."""
    from cairn.datastream.stream_execution_environment import (
        reset_context_defaults,
        set_context_defaults,
    )

    with pytest.raises(ConfigurationError, match=r"unknown filesystem scheme 'foo'"):
        StreamExecutionEnvironment().configure({key: "foo://bucket/job/chk-3"})
    try:
        with pytest.raises(ConfigurationError, match=r"state-recovery\.path.*scheme 'foo'"):
            set_context_defaults(restore_path="foo://bucket/job/chk-3")  # --from-checkpoint
    finally:
        reset_context_defaults()
    env = StreamExecutionEnvironment().configure({key: "memory://cairn/job/chk-3"})
    env.from_collection([1]).print()
    assert env.prepare_job().settings.restore_path == "memory://cairn/job/chk-3"
