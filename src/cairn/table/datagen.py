"""The ``datagen`` table source (Flink's ``'connector' = 'datagen'``) on ``DataGeneratorSource``.

Invariant: row ``i`` is a pure function of its index ``i`` (a ``sequence`` field is
``start + i``; a ``random`` field draws from a generator seeded by ``i`` and the field's
position), so the rows are checkpointed as the DataStream source's split positions, and a
restored or rescaled job emits the same multiset of rows. The table is bounded when it has
``number-of-rows`` or a ``sequence`` field (it ends with its shortest sequence, as Flink's).

>>> from cairn.table.types import DataTypes
>>> g = RowGenerator([FieldSpec("sequence", DataTypes.BIGINT(), start=10, end=12)])
>>> [g(i) for i in range(3)], g.count
([(0, (10,)), (0, (11,)), (0, (12,))], 3)
"""

from __future__ import annotations

import datetime
import decimal
import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.plan import StreamScan
from cairn.table.source_reuse import reused
from cairn.table.types import DataType

__all__ = ["FieldSpec", "RowGenerator", "datagen_options", "datagen_scan"]

_FIELD_OPTIONS = ("kind", "start", "end", "min", "max", "length", "null-rate")
_INT_RANGE = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}
_EPOCH = datetime.datetime(2024, 1, 1)
_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class FieldSpec:
    """How one column is generated."""

    kind: str
    data_type: DataType
    start: int | None = None
    end: int | None = None
    min: float | None = None
    max: float | None = None
    length: int = 100
    null_rate: float = 0.0


class RowGenerator:
    """``(kind, row)`` record ``i`` of the table; ``count`` rows, or unbounded (None)."""

    def __init__(self, fields: list[FieldSpec], number_of_rows: int | None = None) -> None:
        self.fields = fields
        lengths = [f.end - f.start + 1 for f in fields if f.kind == "sequence"]  # type: ignore[operator]
        bounds = [*lengths, *([number_of_rows] if number_of_rows is not None else [])]
        self.count: int | None = max(0, min(bounds)) if bounds else None

    def __call__(self, i: int) -> tuple[int, tuple[Any, ...]]:
        return (0, tuple(_value(f, n, i) for n, f in enumerate(self.fields)))


def _value(f: FieldSpec, position: int, i: int) -> Any:
    root = f.data_type.root
    if f.kind == "sequence":
        assert f.start is not None
        v = f.start + i
        return str(v) if f.data_type.is_string else _number(root, v)
    rnd = random.Random(i * 1_000_003 + position)
    if f.null_rate and rnd.random() < f.null_rate:
        return None
    if root in _INT_RANGE:
        lo, hi = _INT_RANGE[root]
        return rnd.randint(
            int(f.min) if f.min is not None else lo, int(f.max) if f.max is not None else hi
        )
    if root in ("FLOAT", "DOUBLE", "DECIMAL"):
        lo_f = f.min if f.min is not None else 0.0
        hi_f = f.max if f.max is not None else 1.0e9
        x = rnd.uniform(lo_f, hi_f)
        return _number(root, x)
    if root == "BOOLEAN":
        return rnd.random() < 0.5
    if f.data_type.is_string:
        length = f.length if root != "CHAR" else f.data_type.params[0]
        return "".join(rnd.choice(_ALPHABET) for _ in range(length))
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _EPOCH + datetime.timedelta(milliseconds=rnd.randrange(86_400_000 * 365))
    if root == "DATE":
        return (_EPOCH + datetime.timedelta(days=rnd.randrange(365))).date()
    raise ValidationError(f"datagen cannot generate random values of type {f.data_type}")


def _number(root: str, v: float) -> Any:
    if root == "DECIMAL":
        return decimal.Decimal(str(round(v, 2)))
    if root in ("FLOAT", "DOUBLE"):
        return float(v)
    return int(v)


def datagen_options(columns: Columns) -> set[str]:
    """The option keys of a datagen table over ``columns``."""
    keys = {"number-of-rows", "rows-per-second"}
    for name in columns.names:
        keys.update(f"fields.{name}.{o}" for o in _FIELD_OPTIONS)
    return keys


def _spec(name: str, data_type: DataType, options: Mapping[str, str]) -> FieldSpec:
    def get(key: str) -> str | None:
        return options.get(f"fields.{name}.{key}")

    kind = get("kind") or "random"
    try:
        if kind == "sequence":
            start, end = get("start"), get("end")
            if start is None or end is None:
                raise ValidationError(
                    f"Could not find required property 'fields.{name}.start' and"
                    f" 'fields.{name}.end' for sequence generator."
                )
            if not (data_type.is_string or data_type.root in _INT_RANGE):
                raise ValidationError(f"datagen: a sequence of {data_type} is not supported")
            return FieldSpec("sequence", data_type, start=int(start), end=int(end))
        if kind != "random":
            raise ValidationError(
                f"Unsupported generator kind '{kind}' for 'fields.{name}.kind':"
                " use 'random' or 'sequence'"
            )
        low, high, length, rate = get("min"), get("max"), get("length"), get("null-rate")
        return FieldSpec(
            "random",
            data_type,
            min=float(low) if low is not None else None,
            max=float(high) if high is not None else None,
            length=int(length) if length is not None else 100,
            null_rate=float(rate) if rate is not None else 0.0,
        )
    except ValueError as e:
        raise ValidationError(
            f"datagen: a bad value in the options of field {name!r}: {e}"
        ) from None


def datagen_scan(name: str, columns: Columns, options: Mapping[str, str]) -> StreamScan:
    """The scan of a datagen table (options already checked against ``datagen_options``)."""
    rows = options.get("number-of-rows")
    generator = RowGenerator(
        [_spec(c.name, c.data_type, options) for c in columns.columns],
        int(rows) if rows is not None else None,
    )
    rate = float(options.get("rows-per-second", "10000"))
    path = f"default_catalog.default_database.{name}"

    def build(env: StreamExecutionEnvironment) -> DataStream:
        source = DataGeneratorSource(
            generator, generator.count, RateLimiterStrategy.per_second(rate)
        )
        stream = env.from_source(source, WatermarkStrategy.no_watermarks(), f"Source: {name}")
        scanned: DataStream = stream.uid(f"table-source-{path}")
        return scanned

    return StreamScan(columns, path, reused(build))
