"""A string key/value configuration with PyFlink's API (``pyflink.common.Configuration``).

Invariant: values are stored as strings exactly as Flink's textual configuration would hold
them; nothing is validated here. The execution environment validates every key and value (see
``cairn.common.config_options``) when it takes the configuration over, so a typo fails there
with a suggestion instead of being silently ignored.

>>> conf = Configuration().set_string("execution.checkpointing.interval", "10 s")
>>> conf.set_integer("parallelism.default", 4).get_integer("parallelism.default", 1)
4
>>> conf.to_dict()
{'execution.checkpointing.interval': '10 s', 'parallelism.default': '4'}
"""

from __future__ import annotations

import builtins
import copy
import datetime
import enum
from collections.abc import Mapping
from typing import Any

from cairn.common.config_values import (
    format_bool,
    format_duration_ms,
    format_map,
    parse_bool,
    parse_duration_ms,
    parse_float,
    parse_int,
)

__all__ = ["Configuration"]


def to_config_string(value: Any) -> str:
    """The textual form of a Python value: booleans as ``true``/``false``, enums by name,
    durations (``timedelta``, ``Duration``, ``Time``) in Flink's duration format."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return format_bool(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta) or callable(getattr(value, "to_milliseconds", None)):
        return format_duration_ms(parse_duration_ms(value))
    if isinstance(value, Mapping):
        return format_map({str(k): str(v) for k, v in value.items()})
    return str(value)


class Configuration:
    """Lightweight configuration object which stores key/value pairs as strings."""

    def __init__(self, other: Configuration | Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, str] = {}
        if isinstance(other, Configuration):
            self._data.update(other._data)
        elif other is not None:
            for key, value in other.items():
                self.set(key, value)

    # -- generic -----------------------------------------------------------------------------

    def set(self, key: str, value: Any) -> Configuration:
        """Store any value in its textual form (Cairn extension; Java's ``set``)."""
        if not isinstance(key, str) or not key:
            raise TypeError(f"configuration keys must be non-empty strings, got {key!r}")
        self._data[key] = to_config_string(value)
        return self

    def get(self, key: str, default_value: Any = None) -> Any:
        """The raw string value of ``key``, or ``default_value`` when it is absent."""
        return self._data.get(key, default_value)

    # -- typed (PyFlink) ---------------------------------------------------------------------

    def get_string(self, key: str, default_value: str | None) -> str | None:
        return self._data.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        return self.set(key, str(value))

    def get_integer(self, key: str, default_value: int) -> int:
        raw = self._data.get(key)
        return default_value if raw is None else parse_int(raw)

    def set_integer(self, key: str, value: int) -> Configuration:
        return self.set(key, str(parse_int(value)))

    def get_boolean(self, key: str, default_value: bool) -> bool:
        raw = self._data.get(key)
        return default_value if raw is None else parse_bool(raw)

    def set_boolean(self, key: str, value: bool) -> Configuration:
        return self.set(key, format_bool(parse_bool(value)))

    def get_float(self, key: str, default_value: float) -> float:
        raw = self._data.get(key)
        return default_value if raw is None else parse_float(raw)

    def set_float(self, key: str, value: float) -> Configuration:
        return self.set(key, repr(parse_float(value)))

    def get_bytearray(self, key: str, default_value: bytes) -> bytes:
        raw = self._data.get(key)
        return default_value if raw is None else bytes.fromhex(raw)

    def set_bytearray(self, key: str, value: bytes) -> Configuration:
        return self.set(key, bytes(value).hex())

    # -- whole-map operations ----------------------------------------------------------------

    def key_set(self) -> builtins.set[str]:
        return set(self._data)

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def remove_config(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was present."""
        return self._data.pop(key, None) is not None

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        """Copy every entry of ``other`` (with ``prefix`` prepended to its keys)."""
        for key, value in other._data.items():
            self._data[(prefix or "") + key] = value
        return self

    def add_all_to_dict(self, target_dict: dict[str, Any]) -> None:
        target_dict.update(self._data)

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def __deepcopy__(self, memo: dict[int, Any]) -> Configuration:
        return Configuration(copy.copy(self._data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and self._data == other._data

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"
