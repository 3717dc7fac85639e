"""Configuration keys, aliases, value formats and their errors."""

from __future__ import annotations

import datetime

import pytest

from cairn.common import CheckpointingMode, Configuration, ConfigurationError, Duration
from cairn.common import config_options as opts
from cairn.common.config_values import (
    format_duration_ms,
    format_memory_bytes,
    parse_duration_ms,
    parse_map,
    parse_memory_bytes,
)
from cairn.datastream import StreamExecutionEnvironment


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("10 s", 10_000),
        ("500 ms", 500),
        ("500ms", 500),
        ("1 min", 60_000),
        ("1m", 60_000),
        ("2h", 7_200_000),
        ("1 d", 86_400_000),
        ("3 seconds", 3_000),
        ("1500", 1_500),
        (" 7 MS ", 7),
        ("2000000 ns", 2),
    ],
)
def test_flink_duration_strings(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


def test_duration_python_values() -> None:
    assert parse_duration_ms(250) == 250
    assert parse_duration_ms(datetime.timedelta(seconds=2)) == 2_000
    assert parse_duration_ms(Duration.of_minutes(1)) == 60_000


@pytest.mark.parametrize("bad", ["ten seconds", "10 fortnights", "-5 s", "1.5 s", True, -1, None])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_ms(bad)


def test_duration_formatting_round_trips() -> None:
    for ms in (0, 1, 999, 1_000, 30_000, 60_000, 90_000, 3_600_000, 86_400_000):
        assert parse_duration_ms(format_duration_ms(ms)) == ms
    assert format_duration_ms(120_000) == "2 min"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64 mb", 64 << 20),
        ("64m", 64 << 20),
        ("512k", 512 << 10),
        ("1 GB", 1 << 30),
        ("3 bytes", 3),
        ("1000", 1000),
        (" 2 tb ", 2 << 40),
        ("7 mebibytes", 7 << 20),
    ],
)
def test_flink_memory_sizes(text: str, size: int) -> None:
    assert parse_memory_bytes(text) == size


@pytest.mark.parametrize("bad", ["-1", "1.5 mb", "64 mib", "lots", "", True, -5, 2.0])
def test_bad_memory_sizes(bad: object) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_memory_bytes(bad)


def test_memory_size_formatting_round_trips() -> None:
    assert format_memory_bytes(64 << 20) == "64 mb"
    assert format_memory_bytes(1000) == "1000 bytes"
    for size in (0, 1, 1024, 1536, 1 << 30, 5 << 40):
        assert parse_memory_bytes(format_memory_bytes(size)) == size


def test_map_values() -> None:
    assert parse_map("a:1, b:two") == {"a": "1", "b": "two"}
    with pytest.raises(ValueError):
        parse_map("no-colon")


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("state.checkpoints.num-retained", "execution.checkpointing.num-retained"),
        ("state.checkpoints.dir", "execution.checkpointing.dir"),
        ("execution.checkpointing.unaligned", "execution.checkpointing.unaligned.enabled"),
        ("execution.buffer-timeout", "execution.buffer-timeout.interval"),
        ("execution.savepoint.path", "execution.state-recovery.path"),
        ("restart-strategy", "restart-strategy.type"),
    ],
)
def test_deprecated_keys_resolve(alias: str, canonical: str) -> None:
    assert opts.canonical_key(alias) == canonical


@pytest.mark.parametrize(
    ("spelling", "value"),
    [
        ("none", "none"),
        ("off", "none"),
        ("disable", "none"),
        ("fixeddelay", "fixed-delay"),
        ("Fixed-Delay", "fixed-delay"),
        ("exponential-delay", "exponential-delay"),
        ("failurerate", "failure-rate"),
    ],
)
def test_restart_strategy_type_spellings(spelling: str, value: str) -> None:
    assert opts.parse_value("restart-strategy.type", spelling) == ("restart-strategy.type", value)


def test_unknown_key_suggests_the_closest_one() -> None:
    with pytest.raises(ConfigurationError) as info:
        opts.get_option("execution.checkpointing.intervall")
    assert str(info.value) == (
        "unknown configuration option 'execution.checkpointing.intervall'; "
        "did you mean 'execution.checkpointing.interval'?"
    )


def test_unknown_key_close_to_an_alias_suggests_the_current_name() -> None:
    with pytest.raises(ConfigurationError, match=r"did you mean 'execution\.checkpointing\.dir'"):
        opts.get_option("state.checkpoint.dir")


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("execution.checkpointing.interval", "soon", "expected a duration"),
        ("execution.checkpointing.interval", "5 ms", "at least 10 ms"),
        ("execution.checkpointing.timeout", "1", "at least 10 ms"),
        ("execution.checkpointing.max-concurrent-checkpoints", "0", "at least 1"),
        ("execution.checkpointing.tolerable-failed-checkpoints", "-1", "at least 0"),
        ("execution.checkpointing.num-retained", "0", "at least 1"),
        ("execution.checkpointing.mode", "TWICE", "'AT_LEAST_ONCE', 'EXACTLY_ONCE'"),
        ("execution.checkpointing.unaligned.enabled", "yes", "'true' or 'false'"),
        ("parallelism.default", "many", "expected an integer"),
        ("pipeline.max-parallelism", "40000", "between 1 and 32768"),
        ("restart-strategy.exponential-delay.jitter-factor", "2", "between 0.0 and 1.0"),
        ("cairn.executor", "yarn", "'inprocess', 'spark'"),
        ("execution.checkpointing.dir", " ", "must not be empty"),
    ],
)
def test_bad_values_name_key_value_and_expectation(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        opts.parse_value(key, value)
    message = str(info.value)
    assert f"invalid value {value!r} for configuration option {key!r}" in message
    assert fragment in message


def test_bad_value_under_a_deprecated_key_names_both() -> None:
    with pytest.raises(
        ConfigurationError, match=r"deprecated name of 'execution\.checkpointing\.num-retained'"
    ):
        opts.parse_value("state.checkpoints.num-retained", "none")


def test_spark_keys_pass_through_unvalidated() -> None:
    assert opts.parse_value("spark.executor.memory", "2g") == ("spark.executor.memory", "2g")
    with pytest.raises(ConfigurationError):
        opts.parse_value("spark.", "x")


def test_register_option_extension_point() -> None:
    option = opts.ConfigOption(
        "test.api.flush-size", "int", 8, "test option", ("test.api.old-flush-size",)
    )
    assert opts.register_option(option) is option
    assert opts.register_option(option) is option  # idempotent
    assert opts.parse_value("test.api.old-flush-size", "16") == ("test.api.flush-size", 16)
    with pytest.raises(ValueError, match="already registered"):
        opts.register_option(opts.ConfigOption("test.api.flush-size", "str", None, "other"))
    with pytest.raises(ValueError, match="already registered"):
        opts.register_option(opts.ConfigOption("test.api.x", "int", 0, "x", ("state.backend",)))


def test_every_builtin_default_parses_and_formats() -> None:
    for option in opts.all_options():
        if option.default is not None:
            assert option.parse(option.format(option.default)) == option.default, option.key


def test_validate_configuration_prefers_current_key_over_alias() -> None:
    for raw in (
        {"state.checkpoints.dir": "/old", "execution.checkpointing.dir": "/new"},
        {"execution.checkpointing.dir": "/new", "state.checkpoints.dir": "/old"},
    ):
        assert opts.validate_configuration(raw) == {"execution.checkpointing.dir": "/new"}


def test_configuration_pyflink_methods() -> None:
    conf = Configuration()
    assert conf.set_string("a", "x").set_integer("b", 3).set_boolean("c", True) is conf
    conf.set_float("d", 0.5)
    assert (conf.get_string("a", None), conf.get_integer("b", 0)) == ("x", 3)
    assert (conf.get_boolean("c", False), conf.get_float("d", 0.0)) == (True, 0.5)
    assert conf.get_integer("missing", 7) == 7
    assert conf.key_set() == {"a", "b", "c", "d"}
    assert conf.contains_key("a") and conf.remove_config("a") and not conf.remove_config("a")
    other = Configuration().set_string("k", "v")
    conf.add_all(other, prefix="p.")
    assert conf.to_dict()["p.k"] == "v"
    target: dict[str, object] = {}
    other.add_all_to_dict(target)
    assert target == {"k": "v"}
    assert Configuration(other) == other and Configuration(other) is not other


def test_configuration_set_stores_flink_text() -> None:
    conf = Configuration()
    conf.set("execution.checkpointing.interval", Duration.of_seconds(30))
    conf.set("execution.checkpointing.mode", CheckpointingMode.AT_LEAST_ONCE)
    conf.set("execution.checkpointing.unaligned.enabled", True)
    assert conf.to_dict() == {
        "execution.checkpointing.interval": "30 s",
        "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "execution.checkpointing.unaligned.enabled": "true",
    }


def test_environment_validates_configuration_atomically() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    default = env.get_parallelism()  # the CPU count on embedded local Spark
    conf = Configuration().set_string("parallelism.default", str(default + 1))
    conf.set_string("execution.checkpointing.intervall", "10 s")
    with pytest.raises(ConfigurationError, match="did you mean"):
        env.configure(conf)
    assert env.get_parallelism() == default  # nothing applied
    with pytest.raises(ConfigurationError, match="did you mean"):
        StreamExecutionEnvironment.get_execution_environment(conf)


def test_environment_from_configuration_canonicalizes() -> None:
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", "10 s")
    conf.set_string("execution.checkpointing.mode", "at_least_once")
    conf.set_string("state.checkpoints.num-retained", "3")
    conf.set_string("spark.sql.shuffle.partitions", "4")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert env.get_checkpoint_interval() == 10_000
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert env.get_checkpoint_config().get_number_of_retained_checkpoints() == 3
