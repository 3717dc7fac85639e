"""Parsing and formatting of configuration values in Flink's textual formats.

Invariant: every parser accepts both the textual form (what a YAML file or ``-D`` flag holds)
and the natural Python value, returns one canonical Python value, and raises ``ValueError``
with the expected format on anything else; ``format_*`` is the inverse of ``parse_*``.

>>> parse_duration_ms("1 min"), parse_duration_ms("500ms"), parse_duration_ms("2h")
(60000, 500, 7200000)
>>> format_duration_ms(90_000)
'90 s'
>>> parse_memory_bytes("64 mb"), format_memory_bytes(64 * 1024 * 1024)
(67108864, '64 mb')
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DURATION_HINT",
    "MEMORY_HINT",
    "format_bool",
    "format_duration_ms",
    "format_map",
    "format_memory_bytes",
    "parse_bool",
    "parse_duration_ms",
    "parse_float",
    "parse_int",
    "parse_map",
    "parse_memory_bytes",
]

DURATION_HINT = (
    "a duration such as '10 s', '500 ms', '1 min', '2 h' or a plain number of milliseconds"
)

MEMORY_HINT = "a memory size such as '64 mb', '512 kb', '1 gb' or a plain number of bytes"

_NANOS_PER_UNIT: dict[str, int] = {}
for _labels, _nanos in (
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
    (("µs", "us", "micro", "micros", "microsecond", "microseconds"), 1_000),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), 1_000_000_000),
    (("m", "min", "minute", "minutes"), 60_000_000_000),
    (("h", "hour", "hours"), 3_600_000_000_000),
    (("d", "day", "days"), 86_400_000_000_000),
):
    for _label in _labels:
        _NANOS_PER_UNIT[_label] = _nanos

_DURATION_RE = re.compile(r"^(\d+)\s*([a-zµ]*)$")

# Largest units first: a duration prints in the largest unit that divides it exactly.
_FORMAT_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000))


def parse_duration_ms(value: Any) -> int:
    """Milliseconds of a Flink duration string, a number (ms), a ``timedelta`` or a
    ``Duration``/``Time`` (anything with ``to_milliseconds()``). Sub-ms parts round down."""
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HINT}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration must not be negative")
        return value
    if isinstance(value, datetime.timedelta):
        if value < datetime.timedelta(0):
            raise ValueError("a duration must not be negative")
        return value // datetime.timedelta(milliseconds=1)
    to_ms = getattr(value, "to_milliseconds", None)
    if callable(to_ms):
        return parse_duration_ms(int(to_ms()))
    if isinstance(value, str):
        number, unit = _number_and_unit(value, _DURATION_RE, "ms")
        nanos = _NANOS_PER_UNIT.get(unit)
        if number >= 0 and nanos is not None:
            return number * nanos // 1_000_000
    raise ValueError(f"expected {DURATION_HINT}")


def _in_largest_exact_unit(amount: int, units: tuple[tuple[str, int], ...], base: str) -> str:
    """``amount`` in the largest of ``units`` (largest first) that divides it, else ``base``."""
    if amount > 0:
        for label, unit in units:
            if amount % unit == 0:
                return f"{amount // unit} {label}"
    return f"{amount} {base}"


def _number_and_unit(text: str, pattern: re.Pattern[str], default_unit: str) -> tuple[int, str]:
    """``("64", "mb")`` from ``"64 MB"``; ``(-1, "")`` when ``text`` does not match."""
    match = pattern.match(text.strip().lower())
    if not match:
        return -1, ""
    return int(match.group(1)), match.group(2) or default_unit


def format_duration_ms(ms: int) -> str:
    """The shortest exact Flink form: ``60000`` → ``'1 min'``, ``1500`` → ``'1500 ms'``."""
    return _in_largest_exact_unit(ms, _FORMAT_UNITS, "ms")


# Flink's MemorySize units: binary multiples whatever the spelling.
_BYTES_PER_UNIT: dict[str, int] = {}
for _units, _bytes in (
    (("b", "bytes"), 1),
    (("k", "kb", "kibibytes"), 1 << 10),
    (("m", "mb", "mebibytes"), 1 << 20),
    (("g", "gb", "gibibytes"), 1 << 30),
    (("t", "tb", "tebibytes"), 1 << 40),
):
    for _unit in _units:
        _BYTES_PER_UNIT[_unit] = _bytes

_MEMORY_RE = re.compile(r"^(\d+)\s*([a-z]*)$")
_FORMAT_MEMORY_UNITS = (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10))


def parse_memory_bytes(value: Any) -> int:
    """Bytes of a Flink memory size (``'64 mb'``, ``'512k'``, ``'1 gb'``; units are binary
    multiples, as in Flink's ``MemorySize``) or a plain number of bytes.

    >>> parse_memory_bytes("512k"), parse_memory_bytes(1000), parse_memory_bytes("2 gb")
    (524288, 1000, 2147483648)
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {MEMORY_HINT}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a memory size must not be negative")
        return value
    if isinstance(value, str):
        number, unit = _number_and_unit(value, _MEMORY_RE, "b")
        multiplier = _BYTES_PER_UNIT.get(unit)
        if number >= 0 and multiplier is not None:
            return number * multiplier
    raise ValueError(f"expected {MEMORY_HINT}")


def format_memory_bytes(size: int) -> str:
    """The shortest exact form: ``1048576`` → ``'1 mb'``, ``1000`` → ``'1000 bytes'``."""
    return _in_largest_exact_unit(size, _FORMAT_MEMORY_UNITS, "bytes")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("expected a boolean: 'true' or 'false'")


def format_bool(value: bool) -> str:
    return "true" if value else "false"


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
        return int(value)
    raise ValueError("expected an integer")


def parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError("expected a number")


def parse_map(value: Any) -> dict[str, str]:
    """Flink's map format ``'k1:v1,k2:v2'`` or a ``dict``; keys and values become ``str``."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        result: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            key, sep, val = part.partition(":")
            if not sep or not key.strip():
                raise ValueError("expected a map such as 'key1:value1,key2:value2'")
            result[key.strip()] = val.strip()
        return result
    raise ValueError("expected a map such as 'key1:value1,key2:value2' or a dict")


def format_map(value: Mapping[str, str]) -> str:
    for k, v in value.items():
        if any(c in str(k) + str(v) for c in ",:"):
            raise ValueError(f"map entries must not contain ',' or ':': {k!r}: {v!r}")
    return ",".join(f"{k}:{v}" for k, v in value.items())
