"""CSV at PyFlink's module path (``pyflink.datastream.formats.csv``): ``CsvSchema`` for the
file connector (``CsvReaderFormat`` to read, ``CsvBulkWriters`` to write) and the row
schemas of ``cairn.common.formats.csv`` for messages (Kafka).

Invariant: a ``CsvSchema`` is a picklable value (columns, their types, the dialect); a CSV
file is read one line per row, so a quoted field may not contain a line break; a line that
does not fit fails naming the file, the field and the value.

Column types are ``TypeInformation`` (``Types.INT()``...) where PyFlink takes
``DataTypes``, since Cairn has no Table API.

>>> from cairn.common import Types
>>> schema = (CsvSchema.builder().add_number_column("id", number_type=Types.INT())
...           .add_string_column("name").set_column_separator("|").build())
>>> schema.get_type_info()
RowTypeInfo(id: Integer, name: String)
>>> CsvReaderFormat.for_schema(schema).records(["1|ada"], 0)
[Row(id=1, name='ada')]
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, BinaryIO

from cairn.common.formats.csv import (
    CsvDialect,
    CsvRowDeserializationSchema,
    CsvRowDeserializationSchemaBuilder,
    CsvRowSerializationSchema,
    CsvRowSerializationSchemaBuilder,
    row_codec,
)
from cairn.common.formats.values import ParseErrors
from cairn.common.serialization import BulkWriter, BulkWriterFactory
from cairn.common.typeinfo import RowTypeInfo, TypeInformation, Types
from cairn.datastream.connectors.formats import StreamFormat

__all__ = [
    "CsvBulkWriter",
    "CsvBulkWriters",
    "CsvReaderFormat",
    "CsvRowDeserializationSchema",
    "CsvRowDeserializationSchemaBuilder",
    "CsvRowSerializationSchema",
    "CsvRowSerializationSchemaBuilder",
    "CsvSchema",
    "CsvSchemaBuilder",
]


class CsvSchema:
    """Columns, their types and the CSV dialect of a file (PyFlink's ``CsvSchema``)."""

    def __init__(
        self,
        names: list[str],
        types: list[TypeInformation],
        dialect: CsvDialect,
        use_header: bool = False,
        skip_first_data_row: bool = False,
        strict_headers: bool = False,
    ) -> None:
        self.names = list(names)
        self.types = list(types)
        self.dialect = dialect
        self.use_header = use_header
        self.skip_first_data_row = skip_first_data_row
        self.strict_headers = strict_headers

    @staticmethod
    def builder() -> CsvSchemaBuilder:
        return CsvSchemaBuilder()

    def get_type_info(self) -> RowTypeInfo:
        """The records' type: ``Types.ROW_NAMED`` of the columns."""
        return Types.ROW_NAMED(self.names, self.types)

    def size(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return self.size()

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {t!r}" for n, t in zip(self.names, self.types, strict=True))
        return f"CsvSchema({cols}; {self.dialect})"


class CsvSchemaBuilder:
    """PyFlink's ``CsvSchemaBuilder``: columns in order, then the dialect."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._types: list[TypeInformation] = []
        self._dialect = CsvDialect()
        self._use_header = False
        self._skip_first = False
        self._strict = False

    def build(self) -> CsvSchema:
        return CsvSchema(
            self._names,
            self._types,
            self._dialect,
            self._use_header,
            self._skip_first,
            self._strict,
        )

    def _add(self, name: str, type_info: TypeInformation) -> CsvSchemaBuilder:
        if not isinstance(type_info, TypeInformation):
            raise TypeError(
                f"column {name!r}: a type is a cairn TypeInformation (Types.INT()...), got "
                f"{type_info!r} (Cairn has no DataTypes)"
            )
        self._names.append(name)
        self._types.append(type_info)
        return self

    def add_array_column(
        self, name: str, separator: str = ";", element_type: TypeInformation | None = None
    ) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, array_element_delimiter=separator)
        return self._add(name, Types.LIST(element_type or Types.STRING()))

    def add_boolean_column(self, name: str) -> CsvSchemaBuilder:
        return self._add(name, Types.BOOLEAN())

    def add_number_column(
        self, name: str, number_type: TypeInformation | None = None
    ) -> CsvSchemaBuilder:
        return self._add(name, number_type or Types.LONG())

    def add_string_column(self, name: str) -> CsvSchemaBuilder:
        return self._add(name, Types.STRING())

    def add_columns_from(self, schema: CsvSchema) -> CsvSchemaBuilder:
        for name, type_info in zip(schema.names, schema.types, strict=True):
            self._add(name, type_info)
        return self

    def clear_columns(self) -> CsvSchemaBuilder:
        self._names.clear()
        self._types.clear()
        return self

    def set_allow_comments(self, allow: bool = True) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, allow_comments=bool(allow))
        return self

    def set_array_element_separator(self, separator: str) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, array_element_delimiter=separator)
        return self

    def set_column_separator(self, char: str) -> CsvSchemaBuilder:
        if len(char) != 1:
            raise ValueError(f"Column separator must be a single char, got {char}")
        self._dialect = replace(self._dialect, field_delimiter=char)
        return self

    def disable_escape_char(self) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, escape_character=None)
        return self

    def set_escape_char(self, char: str) -> CsvSchemaBuilder:
        if len(char) != 1:
            raise ValueError(f"Escape char must be a single char, got {char}")
        self._dialect = replace(self._dialect, escape_character=char)
        return self

    def set_line_separator(self, separator: str) -> CsvSchemaBuilder:
        """For writing; reading recognizes ``\\n`` and ``\\r\\n``."""
        self._dialect = replace(self._dialect, line_delimiter=separator)
        return self

    def set_null_value(self, null_value: str) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, null_literal=null_value)
        return self

    def disable_quote_char(self) -> CsvSchemaBuilder:
        self._dialect = replace(self._dialect, quote_character=None)
        return self

    def set_quote_char(self, char: str) -> CsvSchemaBuilder:
        if len(char) != 1:
            raise ValueError(f"Quote char must be a single char, got {char}")
        self._dialect = replace(self._dialect, quote_character=char)
        return self

    def set_skip_first_data_row(self, skip: bool = True) -> CsvSchemaBuilder:
        self._skip_first = bool(skip)
        return self

    def set_strict_headers(self, strict: bool = True) -> CsvSchemaBuilder:
        """With ``set_use_header``: a header whose names differ from the columns fails."""
        self._strict = bool(strict)
        return self

    def set_use_header(self, use: bool = True) -> CsvSchemaBuilder:
        """Reading skips each file's first line; writing starts each file with the names."""
        self._use_header = bool(use)
        return self

    def size(self) -> int:
        return len(self._names)

    def __len__(self) -> int:
        return self.size()


class CsvReaderFormat(StreamFormat):
    """Reads CSV files into ``Row``s of the schema's type (PyFlink's ``CsvReaderFormat``).

    ``FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), path)``.
    """

    def __init__(self, schema: CsvSchema, ignore_parse_errors: bool = False) -> None:
        super().__init__("UTF-8")
        self.schema = schema
        self.row_type = schema.get_type_info()
        row_codec(self.row_type, schema.dialect)  # refuses a type CSV cannot take, now
        self.ignore_parse_errors = ignore_parse_errors
        self.errors = ParseErrors("CsvReaderFormat")

    @staticmethod
    def for_schema(schema: CsvSchema) -> CsvReaderFormat:
        return CsvReaderFormat(schema)

    def with_ignore_parse_errors(self) -> CsvReaderFormat:
        """Skip (and count, in ``skipped_records``) lines that do not fit (Flink's
        ``CsvReaderFormat.withIgnoreParseErrors``); by default such a line fails the job."""
        return CsvReaderFormat(self.schema, ignore_parse_errors=True)

    @property
    def skipped_records(self) -> int:
        return self.errors.skipped

    def records(self, lines: list[str], first_line: int) -> list[Any]:
        schema = self.schema
        dialect = schema.dialect
        skip = int(schema.use_header) + int(schema.skip_first_data_row)
        parse = row_codec(self.row_type, dialect).parse
        out = []
        for n, line in enumerate(lines, start=first_line):
            if n < skip:
                if n == 0 and schema.use_header and schema.strict_headers:
                    self._check_header(dialect.split(line))
                continue
            if not line or (dialect.allow_comments and line.startswith("#")):
                continue
            try:
                out.append(parse(dialect.split(line)))
            except ValueError as exc:
                if not self.ignore_parse_errors:
                    raise ValueError(f"line {n + 1}: {exc}") from None
                self.errors.skip(ValueError(f"line {n + 1}: {exc}"))
        return out

    def _check_header(self, header: list[str]) -> None:
        if header != self.schema.names:
            raise ValueError(
                f"the CSV header {header} differs from the columns {self.schema.names}"
            )


class _CsvWriterFactory(BulkWriterFactory):
    def __init__(self, schema: CsvSchema) -> None:
        self.schema = schema
        row_codec(schema.get_type_info(), schema.dialect)  # refuses a type CSV cannot take

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _CsvBulkWriter(stream, self.schema)


class _CsvBulkWriter(BulkWriter):
    def __init__(self, stream: BinaryIO, schema: CsvSchema) -> None:
        self._stream = stream
        self._schema = schema
        self._format = row_codec(schema.get_type_info(), schema.dialect).format
        if schema.use_header:
            stream.write(schema.dialect.join(list(schema.names)).encode())

    def add_element(self, element: Any) -> None:
        self.add_elements([element])

    def add_elements(self, elements: Any) -> None:
        dialect = self._schema.dialect
        text = "".join(dialect.join(self._format(e)) for e in elements)
        self._stream.write(text.encode())

    def flush(self) -> None:
        self._stream.flush()

    def finish(self) -> None:
        self._stream.flush()


class CsvBulkWriters:
    """``CsvBulkWriters.for_schema(schema)``: a ``BulkWriterFactory`` for
    ``FileSink.for_bulk_format`` writing rows (``Row``, tuples, dicts by name) as CSV lines."""

    @staticmethod
    def for_schema(schema: CsvSchema) -> BulkWriterFactory:
        return _CsvWriterFactory(schema)


CsvBulkWriter = CsvBulkWriters  # PyFlink 1.16's name
