"""Deployment and state settings: built once by the API from typed options (and the documented
environment overrides), validated there, and the only thing deploy, launch and state read."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.common.configuration import Configuration
from cairn.common.exceptions import ConfigurationError
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.stream_execution_environment import (
    reset_context_defaults,
    set_context_defaults,
)
from cairn.settings import (
    DEFAULT_FORK_NICENESS,
    DEFAULT_FORK_THRESHOLD,
    DeploySettings,
    ExecutorKind,
    JobSettings,
    StateSettings,
)


def settings_of(conf: dict[str, Any] | None = None) -> JobSettings:
    env = StreamExecutionEnvironment(conf)
    env.from_collection([1]).print()
    return env.prepare_job().settings


def test_defaults() -> None:
    s = settings_of()
    assert s.deploy == DeploySettings()
    assert s.deploy.executor is ExecutorKind.SPARK and s.deploy.workers is None
    # No parallelism set: the CPU count on embedded local Spark (PyFlink's local mode), else 1.
    assert s.parallelism == (os.cpu_count() or 1)
    assert settings_of({"cairn.executor": "inprocess"}).parallelism == 1
    assert settings_of({"cairn.spark.master": "spark://host:7077"}).parallelism == 1
    assert (s.operator_chaining, s.restore_ignore_unclaimed, dict(s.job_parameters)) == (
        True,
        False,
        {},
    )


def test_deploy_settings_come_from_the_typed_options() -> None:
    s = settings_of(
        {
            "cairn.executor": "in-process",  # an accepted spelling
            "cairn.workers": "3",
            "cairn.spark.master": "spark://host:7077",
            "cairn.progress": "true",
            "cairn.testing.faults": "point=processing,attempt=0,records=5",
            "spark.executor.memory": "1g",
            "pipeline.operator-chaining": "false",  # a deprecated name
            "execution.savepoint.ignore-unclaimed-state": "true",
            "pipeline.global-job-parameters": "a:1,b:2",
        }
    )
    assert s.deploy == DeploySettings(
        executor=ExecutorKind.INPROCESS,
        workers=3,
        spark_master="spark://host:7077",
        spark_conf={"spark.executor.memory": "1g"},
        progress=True,
        testing_faults="point=processing,attempt=0,records=5",
    )
    assert s.operator_chaining is False
    assert s.restore_ignore_unclaimed is True
    assert s.job_parameters == {"a": "1", "b": "2"}


def test_fallback_past_committed_checkpoints_is_opt_in() -> None:
    assert settings_of().allow_fallback_past_committed is False
    allowed = settings_of({"cairn.recovery.allow-fallback-past-committed": "true"})
    assert allowed.allow_fallback_past_committed is True
    with pytest.raises(ConfigurationError, match="allow-fallback-past-committed"):
        settings_of({"cairn.recovery.allow-fallback-past-committed": "maybe"})


@pytest.mark.parametrize("workers", ["0", 0, "-2"])
def test_zero_workers_are_refused_where_they_are_set(workers: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"cairn\.workers.*at least 1"):
        StreamExecutionEnvironment().configure({"cairn.workers": workers})
    conf = Configuration()
    conf.set_string("cairn.workers", str(workers))
    with pytest.raises(ConfigurationError, match="the number of workers must be at least 1"):
        StreamExecutionEnvironment(conf)
    try:
        with pytest.raises(ConfigurationError, match=r"cairn\.workers"):
            set_context_defaults(configuration={"cairn.workers": workers})  # cairn run -D
    finally:
        reset_context_defaults()
    with pytest.raises(ValueError, match=r"cairn\.workers must be at least 1"):
        DeploySettings(workers=int(workers))


def test_parallelism_setters_take_ints_only() -> None:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    for setter in (
        env.set_parallelism,
        env.set_max_parallelism,
        env.get_config().set_parallelism,
        env.get_config().set_max_parallelism,
    ):
        with pytest.raises(TypeError, match=r"must be an int, got '2' \(str\)"):
            setter("2")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="must be an int"):
            setter(True)
    assert env.get_parallelism() == 1  # nothing was set by the refused calls
    assert env.set_parallelism(2).get_parallelism() == 2
    # Configuration entries are text by nature: there, "2" stays valid.
    assert settings_of({"parallelism.default": "3"}).parallelism == 3
    ds = env.from_collection([1])
    with pytest.raises(TypeError, match=r"parallelism must be an int, got '2' \(str\)"):
        ds.map(lambda x: x).set_parallelism("2")  # type: ignore[arg-type]


def test_state_settings_read_the_documented_environment_overrides(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("CAIRN_STATE_FORK_THRESHOLD", raising=False)
    monkeypatch.delenv("CAIRN_STATE_FORK_NICENESS", raising=False)
    assert settings_of().state == StateSettings(DEFAULT_FORK_THRESHOLD, DEFAULT_FORK_NICENESS)
    monkeypatch.setenv("CAIRN_STATE_FORK_THRESHOLD", "5000")
    monkeypatch.setenv("CAIRN_STATE_FORK_NICENESS", "3")
    assert settings_of().state == StateSettings(5000, 3)
    for off in ("off", "None", " OFF "):
        monkeypatch.setenv("CAIRN_STATE_FORK_THRESHOLD", off)
        assert settings_of().state.fork_threshold is None
    monkeypatch.setenv("CAIRN_STATE_FORK_THRESHOLD", "many")
    with caplog.at_level(logging.WARNING, logger="cairn.settings"):
        assert settings_of().state.fork_threshold == DEFAULT_FORK_THRESHOLD
    assert "ignoring CAIRN_STATE_FORK_THRESHOLD='many': not an integer" in caplog.text


BELOW_THE_API = ["deploy", "state", "runtime", "checkpoint", "launch.py"]


@pytest.mark.parametrize("part", BELOW_THE_API)
def test_nothing_below_the_api_reads_raw_configuration_or_the_environment(part: str) -> None:
    root = Path(cairn.__file__).parent / part
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    raw_reads = re.compile(r"\.configuration\b|os\.environ\.get|os\.getenv|environ\[|CAIRN_")
    offenders = [
        f"{f.name}:{n}: {line.strip()}"
        for f in files
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if raw_reads.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []
