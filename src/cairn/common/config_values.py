"""Parsing and formatting of configuration values in Flink's textual formats.

Invariant: every parser accepts both the textual form (what a YAML file or ``-D`` flag holds)
and the natural Python value, returns one canonical Python value, and raises ``ValueError``
with the expected format on anything else; ``format_*`` is the inverse of ``parse_*``.

>>> parse_duration_ms("1 min"), parse_duration_ms("500ms"), parse_duration_ms("2h")
(60000, 500, 7200000)
>>> format_duration_ms(90_000)
'90 s'
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DURATION_HINT",
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
        match = _DURATION_RE.match(value.strip().lower())
        if match:
            number, unit = int(match.group(1)), match.group(2) or "ms"
            nanos = _NANOS_PER_UNIT.get(unit)
            if nanos is not None:
                return number * nanos // 1_000_000
    raise ValueError(f"expected {DURATION_HINT}")


def format_duration_ms(ms: int) -> str:
    """The shortest exact Flink form: ``60000`` → ``'1 min'``, ``1500`` → ``'1500 ms'``."""
    if ms > 0:
        for label, unit in _FORMAT_UNITS:
            if ms % unit == 0:
                return f"{ms // unit} {label}"
    return f"{ms} ms"


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


_MEMORY_RE = re.compile(r"^(\d+)\s*([a-z]*)$")
_MEMORY_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
                 "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20, "g": 1 << 30,
                 "gb": 1 << 30, "gibibytes": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def parse_memory_bytes(value: Any) -> int:
    """Bytes of a Flink memory size (``64mb``, ``8 m``, ``1gb``, a plain number of bytes).

    >>> parse_memory_bytes("64mb"), parse_memory_bytes("8 kb"), parse_memory_bytes(100)
    (67108864, 8192, 100)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = _MEMORY_RE.match(str(value).strip().lower())
    if m is None or m.group(2) not in _MEMORY_UNITS:
        raise ValueError("expected a memory size such as '64mb', '8 kb', '1 gb' or bytes")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2)]


def format_memory_bytes(n: int) -> str:
    """The inverse of :func:`parse_memory_bytes`, in the largest exact unit.

    >>> format_memory_bytes(64 << 20), format_memory_bytes(1000)
    ('64mb', '1000b')
    """
    for unit, size in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}b"
