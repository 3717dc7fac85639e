"""``Schema`` with PyFlink's builder, and how a table's resolved schema prints.

Invariant: a ``Schema`` is an immutable description (physical columns with their types,
metadata columns with the connector's key they read or write, computed columns as SQL text,
a watermark, a primary key); it is resolved against a source when a table is made from it,
never here. A sink writes its physical and persisted (not ``VIRTUAL``) metadata columns, in
their declared order. ``schema_text`` prints a resolved schema the way
Flink's ``print_schema`` does.

>>> from cairn.table.types import DataTypes
>>> s = (Schema.new_builder().column("id", DataTypes.BIGINT().not_null())
...      .column("name", DataTypes.STRING()).primary_key("id").build())
>>> print(s)
(
  `id` BIGINT NOT NULL,
  `name` STRING,
  CONSTRAINT `PK_id` PRIMARY KEY (`id`) NOT ENFORCED
)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.types import DataType

__all__ = ["PARTITION_KEYS_OPTION", "Schema", "partition_keys", "schema_text"]

#: Where a table's ``PARTITIONED BY`` keys travel with its options (not a Flink option: a
#: catalog table's partition keys, newline-separated; ``partition_keys`` reads them).
PARTITION_KEYS_OPTION = "$partitioned-by"


def partition_keys(options: Mapping[str, str]) -> tuple[str, ...]:
    """The ``PARTITIONED BY`` keys among a table's ``options``.

    >>> partition_keys({PARTITION_KEYS_OPTION: "dt\\nhm"})
    ('dt', 'hm')
    """
    text = options.get(PARTITION_KEYS_OPTION, "")
    return tuple(text.split("\n")) if text else ()


@dataclass(frozen=True)
class UnresolvedColumn:
    """A declared column: physical (a type), computed (an expression) or metadata (a type,
    ``is_metadata``, the key when it differs from the name, ``is_virtual`` when read-only)."""

    name: str
    data_type: DataType | None = None
    expression: str | None = None
    metadata_key: str | None = None
    comment: str | None = None
    is_metadata: bool = False
    is_virtual: bool = False

    @property
    def key(self) -> str:
        """The connector's metadata key this column reads (its name unless ``FROM 'key'``)."""
        return self.metadata_key or self.name

    @property
    def is_physical(self) -> bool:
        return self.data_type is not None and not self.is_metadata

    @property
    def is_persisted(self) -> bool:
        """Written by a sink: a physical or a non-virtual metadata column."""
        return self.is_physical or (self.is_metadata and not self.is_virtual)

    def metadata_text(self) -> str:
        """``METADATA FROM 'key' VIRTUAL`` as Flink prints the column's extras."""
        text = "METADATA"
        if self.metadata_key is not None:
            text += f" FROM '{self.metadata_key}'"
        return text + (" VIRTUAL" if self.is_virtual else "")


@dataclass(frozen=True)
class Schema:
    """A table's declared columns, watermark and primary key (PyFlink's ``Schema``)."""

    columns: tuple[UnresolvedColumn, ...] = ()
    watermark: tuple[str, str] | None = None
    primary_key: tuple[str, ...] = ()

    @staticmethod
    def new_builder() -> Schema.Builder:
        return Schema.Builder()

    def without_watermark(self) -> Schema:
        """This schema without its watermark declaration."""
        return replace(self, watermark=None)

    def physical_columns(self) -> Columns:
        """The columns a format reads and writes (no metadata, no computed columns)."""
        return Columns.of(
            [
                (c.name, c.data_type)
                for c in self.columns
                if c.is_physical and c.data_type is not None
            ]
        )

    def persisted_columns(self) -> Columns:
        """The columns a sink writes: physical and non-virtual metadata, as declared."""
        return Columns.of(
            [
                (c.name, c.data_type)
                for c in self.columns
                if c.is_persisted and c.data_type is not None
            ]
        )

    def metadata_columns(self) -> tuple[UnresolvedColumn, ...]:
        return tuple(c for c in self.columns if c.is_metadata)

    def __str__(self) -> str:
        lines = []
        for c in self.columns:
            if c.expression is not None:
                lines.append(f"`{c.name}` AS [{c.expression}]")
            elif c.is_metadata:
                lines.append(f"`{c.name}` {c.data_type} {c.metadata_text()}")
            else:
                lines.append(f"`{c.name}` {c.data_type}")
        if self.watermark is not None:
            lines.append(f"WATERMARK FOR `{self.watermark[0]}` AS [{self.watermark[1]}]")
        if self.primary_key:
            keys = ", ".join(f"`{k}`" for k in self.primary_key)
            name = "PK_" + "_".join(self.primary_key)
            lines.append(f"CONSTRAINT `{name}` PRIMARY KEY ({keys}) NOT ENFORCED")
        return "(\n" + ",\n".join(f"  {line}" for line in lines) + "\n)"

    @dataclass
    class Builder:
        columns: list[UnresolvedColumn] = field(default_factory=list)
        watermark_: tuple[str, str] | None = None
        primary_key_: tuple[str, ...] = ()

        def _add(self, column: UnresolvedColumn) -> Schema.Builder:
            if any(c.name == column.name for c in self.columns):
                raise ValidationError(f"Column '{column.name}' is declared twice")
            self.columns.append(column)
            return self

        def from_schema(self, schema: Schema) -> Schema.Builder:
            for c in schema.columns:
                self._add(c)
            self.watermark_ = schema.watermark
            self.primary_key_ = schema.primary_key
            return self

        def from_fields(
            self, field_names: Sequence[str], field_data_types: Sequence[DataType]
        ) -> Schema.Builder:
            for n, t in zip(field_names, field_data_types, strict=True):
                self.column(n, t)
            return self

        def column(self, column_name: str, data_type: DataType | str) -> Schema.Builder:
            if isinstance(data_type, str):
                raise ValidationError(
                    f"Column '{column_name}': give a DataType (DataTypes.STRING()...); SQL type"
                    " strings are read by CREATE TABLE"
                )
            return self._add(UnresolvedColumn(column_name, data_type))

        def column_by_expression(self, column_name: str, expr: str) -> Schema.Builder:
            if not isinstance(expr, str):
                raise ValidationError(
                    f"Computed column '{column_name}' takes a SQL expression as text"
                )
            return self._add(UnresolvedColumn(column_name, expression=expr))

        def column_by_metadata(
            self,
            column_name: str,
            data_type: DataType,
            metadata_key: str | None = None,
            is_virtual: bool = False,
        ) -> Schema.Builder:
            """A column of the connector's metadata ``metadata_key`` (default: the column's
            name); a virtual one is read only, never written by a sink.

            >>> from cairn.table.types import DataTypes
            >>> print(Schema.new_builder().column_by_metadata(
            ...     "ts", DataTypes.TIMESTAMP_LTZ(3), "timestamp", True).build())
            (
              `ts` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL
            )
            """
            if isinstance(data_type, str):
                raise ValidationError(
                    f"Metadata column '{column_name}': give a DataType (DataTypes.BIGINT()...)"
                )
            column = UnresolvedColumn(
                column_name,
                data_type,
                metadata_key=metadata_key,
                is_metadata=True,
                is_virtual=is_virtual,
            )
            return self._add(column)

        def watermark(self, column_name: str, watermark_expr: str) -> Schema.Builder:
            self.watermark_ = (column_name, watermark_expr)
            return self

        def primary_key(self, *column_names: str) -> Schema.Builder:
            self.primary_key_ = tuple(column_names)
            return self

        def primary_key_named(self, constraint_name: str, *column_names: str) -> Schema.Builder:
            return self.primary_key(*column_names)

        def column_comment(self, comment: str) -> Schema.Builder:
            return self

        def build(self) -> Schema:
            names = {c.name for c in self.columns}
            for key in self.primary_key_:
                if key not in names:
                    raise ValidationError(f"Primary key column '{key}' is not a column")
            if self.watermark_ is not None and self.watermark_[0] not in names:
                raise ValidationError(
                    f"Invalid column name '{self.watermark_[0]}' for rowtime attribute in"
                    " watermark declaration"
                )
            return Schema(tuple(self.columns), self.watermark_, self.primary_key_)


def schema_text(columns: Columns) -> str:
    """A resolved schema as ``print_schema`` prints it (a processing-time attribute's type
    reads ``TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*``)."""
    body = ",\n".join(f"  `{c.name}` {c.data_type}" for c in columns.columns)
    return "(\n" + body + "\n)"
