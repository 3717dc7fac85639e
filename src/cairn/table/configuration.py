"""How a table environment is set up and a table described: PyFlink's
``EnvironmentSettings``, ``TableConfig``, ``TableDescriptor`` and ``FormatDescriptor``.

Invariant: pure values and a thin view — settings and descriptors are immutable once built,
and a ``TableConfig`` holds no configuration of its own: every key it is given goes to the
DataStream environment's configuration (as PyFlink's does), checked first where Cairn knows
the key (``table.exec.state.ttl``).

>>> TableDescriptor.for_connector("datagen").option("number-of-rows", 3).build().options
(('number-of-rows', '3'),)
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from cairn.common.config_registry import ConfigOption, register_option
from cairn.common.config_values import format_duration_ms
from cairn.common.configuration import Configuration
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.exec_options import ACCEPTED_EXEC_OPTIONS
from cairn.table.schema import PARTITION_KEYS_OPTION, Schema
from cairn.table.state_ttl import STATE_TTL, parse_state_ttl

__all__ = ["EnvironmentSettings", "FormatDescriptor", "TableConfig", "TableDescriptor"]


@dataclass(frozen=True)
class EnvironmentSettings:
    """Streaming or batch mode (PyFlink's ``EnvironmentSettings``)."""

    streaming: bool = True

    @staticmethod
    def in_streaming_mode() -> EnvironmentSettings:
        return EnvironmentSettings(True)

    @staticmethod
    def in_batch_mode() -> EnvironmentSettings:
        return EnvironmentSettings(False)

    @staticmethod
    def new_instance() -> EnvironmentSettings.Builder:
        return EnvironmentSettings.Builder()

    def is_streaming_mode(self) -> bool:
        return self.streaming

    @dataclass
    class Builder:
        streaming: bool = True

        def in_streaming_mode(self) -> EnvironmentSettings.Builder:
            self.streaming = True
            return self

        def in_batch_mode(self) -> EnvironmentSettings.Builder:
            self.streaming = False
            return self

        def with_configuration(self, config: Configuration) -> EnvironmentSettings.Builder:
            return self

        def build(self) -> EnvironmentSettings:
            return EnvironmentSettings(self.streaming)


DML_SYNC = register_option(
    ConfigOption(
        "table.dml-sync",
        "bool",
        False,
        "Whether an INSERT run by the SQL shell waits for its job to end (Flink's"
        " TableConfigOptions.TABLE_DML_SYNC); false: the job id is printed and the shell goes on.",
    )
)


class TableConfig:
    """The table environment's configuration (Flink's keys); applied to the DataStream
    environment when a statement runs, and checked when set."""

    def __init__(self, env: StreamExecutionEnvironment) -> None:
        self._env = env
        self._configuration = Configuration()
        # each key set: the DataStream environment's entry before its first SET (None: none)
        self._before: dict[str, str | None] = {}

    def get_configuration(self) -> Configuration:
        return self._configuration

    def set(self, key: str, value: str) -> TableConfig:
        if key == STATE_TTL.key:
            parse_state_ttl(value)  # Flink's words for a bad duration
        before = self._env.get_configuration().get_string(key, None)
        self._env.configure({key: str(value)})  # fails here on an unknown key or bad value
        self._before.setdefault(key, before)
        self._configuration.set_string(key, str(value))
        return self

    def reset(self, key: str | None = None) -> None:
        """``RESET 'key'``: the key back to what it was before it was set (unset in this
        config, the DataStream environment's entry restored); ``RESET``: every key set.

        >>> from cairn.table import TableEnvironment
        >>> config = TableEnvironment.create(EnvironmentSettings.in_streaming_mode()).get_config()
        >>> config.set("pipeline.name", "a").reset("pipeline.name")
        >>> config.get("pipeline.name") is None
        True
        """
        env_configuration = self._env.get_configuration()
        for k in [key] if key is not None else list(self._before):
            self._configuration.remove_config(k)
            if k not in self._before:
                continue
            before = self._before.pop(k)
            if before is None:
                env_configuration.remove_config(k)
            else:
                env_configuration.set_string(k, before)

    def get(self, key: str, default: Any = None) -> Any:
        return self._configuration.get_string(key, default)

    def set_idle_state_retention(self, duration: datetime.timedelta) -> None:
        """How long the state of an idle key of a stateful non-windowed operator is kept
        (``table.exec.state.ttl``; zero: forever, the default).

        >>> from cairn.table import TableEnvironment
        >>> config = TableEnvironment.create(EnvironmentSettings.in_streaming_mode()).get_config()
        >>> config.set_idle_state_retention(datetime.timedelta(hours=1))
        >>> config.get("table.exec.state.ttl"), config.get_idle_state_retention()
        ('1 h', datetime.timedelta(seconds=3600))
        """
        self.set(STATE_TTL.key, format_duration_ms(parse_state_ttl(duration)))

    def get_idle_state_retention(self) -> datetime.timedelta:
        """``table.exec.state.ttl`` (zero when unset)."""
        return datetime.timedelta(milliseconds=self.state_ttl_ms())

    def state_ttl_ms(self) -> int:
        """``table.exec.state.ttl`` in milliseconds (0 when unset: no TTL)."""
        return parse_state_ttl(self.get(STATE_TTL.key, "0"))

    def apply(self) -> None:
        """Hand the keys set so far to the DataStream environment."""
        self._env.configure(self._configuration)


@dataclass(frozen=True)
class FormatDescriptor:
    """A format by name and options (PyFlink's ``FormatDescriptor``)."""

    format: str
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def for_format(fmt: str) -> FormatDescriptor.Builder:
        return FormatDescriptor.Builder(fmt)

    def __str__(self) -> str:
        return self.format

    @dataclass
    class Builder:
        format: str
        options: dict[str, str] = field(default_factory=dict)

        def option(self, key: str, value: Any) -> FormatDescriptor.Builder:
            self.options[key] = str(value)
            return self

        def build(self) -> FormatDescriptor:
            return FormatDescriptor(self.format, tuple(self.options.items()))


@dataclass(frozen=True)
class TableDescriptor:
    """A table by connector and options (PyFlink's ``TableDescriptor``)."""

    connector: str
    schema: Schema | None = None
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def for_connector(connector: str) -> TableDescriptor.Builder:
        return TableDescriptor.Builder(connector)

    @dataclass
    class Builder:
        connector: str
        schema_: Schema | None = None
        options: dict[str, str] = field(default_factory=dict)

        def schema(self, schema: Schema) -> TableDescriptor.Builder:
            self.schema_ = schema
            return self

        def partitioned_by(self, *partition_keys: str) -> TableDescriptor.Builder:
            """The partition columns (a ``filesystem`` table's directories), as PyFlink's."""
            self.options[PARTITION_KEYS_OPTION] = "\n".join(partition_keys)
            return self

        def option(self, key: str, value: Any) -> TableDescriptor.Builder:
            self.options[key] = str(value)
            return self

        def format(
            self, fmt: str | FormatDescriptor, format_option_key: str | None = None
        ) -> TableDescriptor.Builder:
            """The format (``'json'`` or a ``FormatDescriptor``), under ``format`` or under
            ``format_option_key`` (``'key.format'``); a descriptor's options get its prefix."""
            key = format_option_key or "format"
            self.options[key] = str(fmt)
            if isinstance(fmt, FormatDescriptor):
                prefix = key[: -len("format")] + fmt.format
                for option, value in fmt.options:
                    self.options[f"{prefix}.{option}"] = value
            return self

        def build(self) -> TableDescriptor:
            return TableDescriptor(self.connector, self.schema_, tuple(self.options.items()))


#: Flink options a ``TableConfig`` accepts without changing Cairn's plan (``exec_options``).
COMPATIBILITY_OPTIONS = tuple(o.key for o in ACCEPTED_EXEC_OPTIONS)
