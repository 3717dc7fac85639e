"""Table connectors by name (``'connector' = 'print'``), with Flink's option keys.

Invariant: a sink table checks at planning what it is given — its options (an unknown or
misspelt key fails naming it, with the keys the connector knows, as Flink's factories do),
its schema against the query's columns, and the query's changelog mode against what the
connector consumes — so a job never starts with a sink that would refuse its rows.
``print`` writes each change as Flink's print connector does (``+I[a, 1]``, ``N> `` before
it when the sink runs in parallel); ``blackhole`` discards.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.api.functions import MapFunction, SinkFunction
from cairn.datastream.data_stream import DataStream
from cairn.table.analysis import Columns
from cairn.table.codegen import java_double_text
from cairn.table.datagen import datagen_options, datagen_scan
from cairn.table.errors import ValidationError
from cairn.table.plan import ChangelogMode, PlanNode
from cairn.table.schema import Schema

__all__ = ["SinkTable", "create_sink", "create_source", "is_source", "java_text"]

_KIND_TEXT = ("+I", "-U", "+U", "-D")


def java_text(value: Any) -> str:
    """A value as Java's ``toString`` of its external type prints it (Flink's ``Row``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_text(value)
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%dT%H:%M")
        if value.second or value.microsecond:
            text += f":{value.second:02d}"
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_text(k)}={java_text(v)}" for k, v in value.items()) + "}"
    return str(value)


class PrintText(MapFunction):
    """``(kind, row)`` → ``+I[a, 1]``."""

    def map(self, value: tuple[int, tuple[Any, ...]]) -> str:
        return f"{_KIND_TEXT[value[0]]}[{', '.join(java_text(v) for v in value[1])}]"


class DiscardingSink(SinkFunction):
    def invoke(self, value: Any, context: Any) -> None:
        pass


@dataclass
class SinkTable:
    """A registered sink: its name, connector, declared schema and options."""

    name: str
    connector: str
    schema: Schema | None
    options: dict[str, str] = field(default_factory=dict)

    def check(self, plan: PlanNode, mode: ChangelogMode) -> None:
        """Refuse, at planning, a query this sink cannot take."""
        if self.schema is not None:
            declared = self.schema.physical_columns()
            if len(declared) != len(plan.columns):
                raise ValidationError(
                    f"Column types of query result and sink for"
                    f" 'default_catalog.default_database.{self.name}' do not match.\n"
                    f"Query schema: [{_types(plan.columns)}]\n"
                    f"Sink schema:  [{_types(declared)}]"
                )
        if mode is not ChangelogMode.INSERT_ONLY and self.connector not in ("print", "blackhole"):
            raise ValidationError(
                f"Table sink 'default_catalog.default_database.{self.name}' doesn't support"
                " consuming update changes"
            )

    def add_to(self, stream: DataStream, columns: Columns) -> None:
        if self.connector == "blackhole":
            stream.add_sink(DiscardingSink()).name(f"Sink: {self.name}")
            return
        identifier = self.options.get("print-identifier")
        text = stream.map(PrintText()).name(f"Sink text: {self.name}")
        sink = text.print(identifier)
        parallelism = self.options.get("sink.parallelism")
        if parallelism is not None:
            sink.set_parallelism(int(parallelism))


def _types(columns: Columns) -> str:
    return ", ".join(f"{c.name}: {c.data_type}" for c in columns.columns)


_OPTIONS = {
    "print": {"print-identifier", "standard-error", "sink.parallelism"},
    "blackhole": set(),
}


#: The source connectors: each one's option keys for a table's columns, and its scan.
_SOURCES: dict[
    str,
    tuple[Callable[[Columns], set[str]], Callable[[str, Columns, Mapping[str, str]], PlanNode]],
] = {"datagen": (datagen_options, datagen_scan)}


def is_source(connector: str) -> bool:
    """Whether ``connector`` names a source (else a sink, or nothing Cairn has)."""
    return connector in _SOURCES


def _check_options(connector: str, known: set[str], options: Mapping[str, str]) -> None:
    unknown = sorted(set(options) - known - {"connector"})
    if unknown:
        raise ValidationError(
            f"Unsupported options found for '{connector}'.\n\nUnsupported options:\n\n"
            + "\n".join(unknown)
            + "\n\nSupported options:\n\nconnector\n"
            + "\n".join(sorted(known))
        )


def _no_factory(connector: str) -> ValidationError:
    return ValidationError(
        f"Could not find any factory for identifier '{connector}' that implements"
        " 'org.apache.flink.table.factories.DynamicTableFactory' in the classpath.\n\n"
        f"Available factory identifiers are:\n\n{chr(10).join(sorted([*_OPTIONS, *_SOURCES]))}"
    )


def create_source(
    name: str, connector: str, schema: Schema | None, options: Mapping[str, str]
) -> PlanNode:
    """The scan of a source table of ``'connector' = connector``, its options checked."""
    if connector not in _SOURCES:
        raise _no_factory(connector)
    if schema is None:
        raise ValidationError(f"Table '{name}' of connector '{connector}' needs a schema")
    columns = schema.physical_columns()
    option_keys, scan = _SOURCES[connector]
    _check_options(connector, option_keys(columns), options)
    return scan(name, columns, options)


def create_sink(
    name: str, connector: str, schema: Schema | None, options: Mapping[str, str]
) -> SinkTable:
    """The sink of ``'connector' = connector``, its options checked."""
    known = _OPTIONS.get(connector)
    if known is None:
        raise _no_factory(connector)
    _check_options(connector, known, options)
    return SinkTable(name, connector, schema, dict(options))
