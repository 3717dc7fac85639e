"""SQL data types with PyFlink's names (``pyflink.table.types``): ``DataTypes`` and its classes.

Invariant: a ``DataType`` is an immutable value; two are equal when they describe the same
SQL type with the same nullability. ``str()`` is Flink's summary string (``BIGINT``,
``STRING NOT NULL``, ``DECIMAL(10, 2)``, ``ROW<`a` INT, `b` STRING>``), which ``print_schema``
and every error message show. A type maps to the Python values PyFlink hands to user code
(``int``, ``float``, ``str``, ``decimal.Decimal``, ``datetime``, ``list``, ``dict``, ``Row``),
and to the ``TypeInformation`` a DataStream carries, both ways
(``to_type_info`` / ``from_type_info``).

>>> str(DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT()),
...                    DataTypes.FIELD("name", DataTypes.STRING().not_null())]))
'ROW<`id` BIGINT, `name` STRING NOT NULL>'
>>> DataTypes.DECIMAL(10, 2) == DataTypes.DECIMAL(10, 2)
True
>>> str(DataTypes.TIMESTAMP_LTZ(3))
'TIMESTAMP_LTZ(3)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.common.type_visitor import TypeVisitor, scalar_name
from cairn.common.typeinfo import (
    TypeInformation,
    Types,
)

__all__ = [
    "ArrayType",
    "AtomicType",
    "DataType",
    "DataTypes",
    "MapType",
    "MultisetType",
    "RowField",
    "RowType",
]

MAX_LENGTH = 2147483647


@dataclass(frozen=True)
class DataType:
    """A SQL type: a root name (``BIGINT``, ``VARCHAR``...), its parameters and nullability."""

    root: str
    params: tuple[int, ...] = ()
    nullable: bool = True

    def not_null(self) -> DataType:
        """The same type, ``NOT NULL``."""
        return replace(self, nullable=False)

    def nullable_(self) -> DataType:
        return replace(self, nullable=True)

    def _body(self) -> str:
        if self.root == "VARCHAR" and self.params == (MAX_LENGTH,):
            return "STRING"
        if self.root == "VARBINARY" and self.params == (MAX_LENGTH,):
            return "BYTES"
        if self.root == "INTERVAL":
            return "INTERVAL SECOND(3)" if self.params[0] == 0 else "INTERVAL MONTH"
        if self.params:
            return f"{self.root}({', '.join(str(p) for p in self.params)})"
        return self.root

    def __str__(self) -> str:
        return self._body() + ("" if self.nullable else " NOT NULL")

    def __repr__(self) -> str:
        return str(self)

    @property
    def is_numeric(self) -> bool:
        return self.root in _NUMERIC

    @property
    def is_string(self) -> bool:
        return self.root in ("CHAR", "VARCHAR")


class AtomicType(DataType):
    """Marker for PyFlink's name of scalar types (every type without children here)."""


@dataclass(frozen=True)
class ArrayType(DataType):
    element_type: DataType = field(default_factory=lambda: DataTypes.NULL())

    def _body(self) -> str:
        return f"ARRAY<{self.element_type}>"


@dataclass(frozen=True)
class MultisetType(DataType):
    element_type: DataType = field(default_factory=lambda: DataTypes.NULL())

    def _body(self) -> str:
        return f"MULTISET<{self.element_type}>"


@dataclass(frozen=True)
class MapType(DataType):
    key_type: DataType = field(default_factory=lambda: DataTypes.NULL())
    value_type: DataType = field(default_factory=lambda: DataTypes.NULL())

    def _body(self) -> str:
        return f"MAP<{self.key_type}, {self.value_type}>"


@dataclass(frozen=True)
class RowField:
    """A named field of a ``ROW`` type."""

    name: str
    data_type: DataType
    description: str | None = None

    def __str__(self) -> str:
        return f"`{self.name}` {self.data_type}"


@dataclass(frozen=True)
class RowType(DataType):
    fields: tuple[RowField, ...] = ()

    def _body(self) -> str:
        return f"ROW<{', '.join(str(f) for f in self.fields)}>"

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field_types(self) -> list[DataType]:
        return [f.data_type for f in self.fields]


_NUMERIC = {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"}
_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


class DataTypes:
    """PyFlink's factory of SQL types: ``DataTypes.BIGINT()``, ``DataTypes.ROW([...])``..."""

    @staticmethod
    def NULL() -> DataType:
        return DataType("NULL")

    @staticmethod
    def CHAR(length: int, nullable: bool = True) -> DataType:
        return DataType("CHAR", (length,), nullable)

    @staticmethod
    def VARCHAR(length: int, nullable: bool = True) -> DataType:
        return DataType("VARCHAR", (length,), nullable)

    @staticmethod
    def STRING(nullable: bool = True) -> DataType:
        return DataType("VARCHAR", (MAX_LENGTH,), nullable)

    @staticmethod
    def BOOLEAN(nullable: bool = True) -> DataType:
        return DataType("BOOLEAN", (), nullable)

    @staticmethod
    def BINARY(length: int, nullable: bool = True) -> DataType:
        return DataType("BINARY", (length,), nullable)

    @staticmethod
    def VARBINARY(length: int, nullable: bool = True) -> DataType:
        return DataType("VARBINARY", (length,), nullable)

    @staticmethod
    def BYTES(nullable: bool = True) -> DataType:
        return DataType("VARBINARY", (MAX_LENGTH,), nullable)

    @staticmethod
    def DECIMAL(precision: int, scale: int, nullable: bool = True) -> DataType:
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ValueError(
                f"Decimal precision must be between 1 and 38 and scale between 0 and the"
                f" precision, got DECIMAL({precision}, {scale})"
            )
        return DataType("DECIMAL", (precision, scale), nullable)

    @staticmethod
    def TINYINT(nullable: bool = True) -> DataType:
        return DataType("TINYINT", (), nullable)

    @staticmethod
    def SMALLINT(nullable: bool = True) -> DataType:
        return DataType("SMALLINT", (), nullable)

    @staticmethod
    def INT(nullable: bool = True) -> DataType:
        return DataType("INT", (), nullable)

    @staticmethod
    def BIGINT(nullable: bool = True) -> DataType:
        return DataType("BIGINT", (), nullable)

    @staticmethod
    def FLOAT(nullable: bool = True) -> DataType:
        return DataType("FLOAT", (), nullable)

    @staticmethod
    def DOUBLE(nullable: bool = True) -> DataType:
        return DataType("DOUBLE", (), nullable)

    @staticmethod
    def DATE(nullable: bool = True) -> DataType:
        return DataType("DATE", (), nullable)

    @staticmethod
    def TIME(precision: int = 0, nullable: bool = True) -> DataType:
        return DataType("TIME", (precision,), nullable)

    @staticmethod
    def TIMESTAMP(precision: int = 6, nullable: bool = True) -> DataType:
        _check_precision("TIMESTAMP", precision)
        return DataType("TIMESTAMP", (precision,), nullable)

    @staticmethod
    def TIMESTAMP_LTZ(precision: int = 6, nullable: bool = True) -> DataType:
        _check_precision("TIMESTAMP_LTZ", precision)
        return DataType("TIMESTAMP_LTZ", (precision,), nullable)

    TIMESTAMP_WITH_LOCAL_TIME_ZONE = TIMESTAMP_LTZ

    @staticmethod
    def INTERVAL(upper: str, lower: str | None = None, nullable: bool = True) -> DataType:
        """``INTERVAL(SECOND())`` (day-time, milliseconds) or ``INTERVAL(MONTH())``."""
        months = upper in ("YEAR", "MONTH")
        return DataType("INTERVAL", (1 if months else 0,), nullable)

    @staticmethod
    def SECOND(precision: int = 6) -> str:
        return "SECOND"

    @staticmethod
    def MINUTE() -> str:
        return "MINUTE"

    @staticmethod
    def HOUR() -> str:
        return "HOUR"

    @staticmethod
    def DAY(precision: int = 2) -> str:
        return "DAY"

    @staticmethod
    def MONTH() -> str:
        return "MONTH"

    @staticmethod
    def YEAR(precision: int = 2) -> str:
        return "YEAR"

    @staticmethod
    def ARRAY(element_type: DataType, nullable: bool = True) -> ArrayType:
        return ArrayType("ARRAY", (), nullable, element_type)

    @staticmethod
    def MULTISET(element_type: DataType, nullable: bool = True) -> MultisetType:
        return MultisetType("MULTISET", (), nullable, element_type)

    @staticmethod
    def MAP(key_type: DataType, value_type: DataType, nullable: bool = True) -> MapType:
        return MapType("MAP", (), nullable, key_type, value_type)

    @staticmethod
    def FIELD(name: str, data_type: DataType, description: str | None = None) -> RowField:
        return RowField(name, data_type, description)

    @staticmethod
    def ROW(row_fields: Sequence[RowField] = (), nullable: bool = True) -> RowType:
        names = [f.name for f in row_fields]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Field names must be unique. Found duplicates: {duplicates}")
        return RowType("ROW", (), nullable, tuple(row_fields))


def _check_precision(name: str, precision: int) -> None:
    if not 0 <= precision <= 9:
        raise ValueError(
            f"{name} precision must be between 0 and 9 (both inclusive), got {precision}"
        )


def is_integral(t: DataType) -> bool:
    return t.root in _INTEGRAL


def is_time_attribute_type(t: DataType) -> bool:
    return t.root in ("TIMESTAMP", "TIMESTAMP_LTZ")


def to_type_info(t: DataType) -> TypeInformation:
    """The ``TypeInformation`` of a DataStream carrying values of ``t`` (``to_data_stream``).

    >>> to_type_info(DataTypes.ROW([DataTypes.FIELD("a", DataTypes.BIGINT())]))
    RowTypeInfo(a: Long)
    """
    scalar = {
        "BOOLEAN": Types.BOOLEAN,
        "TINYINT": Types.BYTE,
        "SMALLINT": Types.SHORT,
        "INT": Types.INT,
        "BIGINT": Types.LONG,
        "FLOAT": Types.FLOAT,
        "DOUBLE": Types.DOUBLE,
        "DECIMAL": Types.BIG_DEC,
        "CHAR": Types.STRING,
        "VARCHAR": Types.STRING,
        "DATE": Types.SQL_DATE,
        "TIME": Types.SQL_TIME,
        "TIMESTAMP": Types.SQL_TIMESTAMP,
        "TIMESTAMP_LTZ": Types.INSTANT,
        "BINARY": Types.PICKLED_BYTE_ARRAY,
        "VARBINARY": Types.PICKLED_BYTE_ARRAY,
        "INTERVAL": Types.LONG,
        "NULL": Types.PICKLED_BYTE_ARRAY,
    }
    if isinstance(t, RowType):
        return Types.ROW_NAMED(t.field_names(), [to_type_info(f) for f in t.field_types()])
    if isinstance(t, ArrayType):
        return Types.LIST(to_type_info(t.element_type))
    if isinstance(t, MapType):
        return Types.MAP(to_type_info(t.key_type), to_type_info(t.value_type))
    if isinstance(t, MultisetType):
        return Types.MAP(to_type_info(t.element_type), Types.INT())
    return scalar[t.root]()


_FROM_BASIC = {
    "String": DataTypes.STRING,
    "Boolean": DataTypes.BOOLEAN,
    "Byte": DataTypes.TINYINT,
    "Short": DataTypes.SMALLINT,
    "Integer": DataTypes.INT,
    "Long": DataTypes.BIGINT,
    "Float": DataTypes.FLOAT,
    "Double": DataTypes.DOUBLE,
    "Character": lambda: DataTypes.CHAR(1),
    "BigInteger": lambda: DataTypes.DECIMAL(38, 0),
    "BigDecimal": lambda: DataTypes.DECIMAL(38, 18),
    "Instant": lambda: DataTypes.TIMESTAMP_LTZ(9),
    "Date": DataTypes.DATE,
    "Time": lambda: DataTypes.TIME(0),
    "Timestamp": lambda: DataTypes.TIMESTAMP(9),
    "LocalDate": DataTypes.DATE,
    "LocalTime": lambda: DataTypes.TIME(9),
    "LocalDateTime": lambda: DataTypes.TIMESTAMP(9),
}


class _FromTypeInfo(TypeVisitor[DataType]):
    """The SQL type of each kind of ``TypeInformation`` (Flink's ``TypeInfoDataTypeConverter``);
    what has no SQL type (pickled objects, unknown hints) is ``BYTES``, Flink's ``RAW``."""

    format = "from_data_stream"

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> DataType:
        fields = [DataTypes.FIELD(n, self.visit(f)) for n, f in zip(names, types, strict=True)]
        return DataTypes.ROW(fields)

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> DataType:
        return DataTypes.ROW([DataTypes.FIELD(f"f{i}", self.visit(f)) for i, f in enumerate(types)])

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> DataType:
        return DataTypes.ARRAY(self.visit(element))

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> DataType:
        return DataTypes.MAP(self.visit(key), self.visit(value))

    def visit_scalar(self, t: TypeInformation) -> DataType:
        factory: Any = _FROM_BASIC.get(scalar_name(t), DataTypes.BYTES)
        made: DataType = factory()
        return made

    def unsupported(self, t: TypeInformation, why: str = "") -> DataType:
        return DataTypes.BYTES()  # bytes, pickled objects, hints without a kind


def from_type_info(info: TypeInformation | None) -> DataType:
    """The SQL type of a DataStream's records (``from_data_stream``), as Flink derives it.

    >>> str(from_type_info(Types.ROW([Types.INSTANT(), Types.STRING()])))
    'ROW<`f0` TIMESTAMP_LTZ(9), `f1` STRING>'
    """
    return DataTypes.BYTES() if info is None else _FromTypeInfo().visit(info)


def python_type_of(value: Any) -> DataType:
    """The SQL type Flink infers for a Python value of ``from_elements`` without a schema.

    >>> str(python_type_of(1)), str(python_type_of("a")), str(python_type_of(1.5))
    ('BIGINT', 'STRING', 'DOUBLE')
    """
    import datetime
    import decimal

    if isinstance(value, bool):
        return DataTypes.BOOLEAN()
    if isinstance(value, int):
        return DataTypes.BIGINT()
    if isinstance(value, float):
        return DataTypes.DOUBLE()
    if isinstance(value, str):
        return DataTypes.STRING()
    if isinstance(value, bytes):
        return DataTypes.BYTES()
    if isinstance(value, decimal.Decimal):
        return DataTypes.DECIMAL(38, 18)
    if isinstance(value, datetime.datetime):
        return DataTypes.TIMESTAMP(6)
    if isinstance(value, datetime.date):
        return DataTypes.DATE()
    if isinstance(value, datetime.time):
        return DataTypes.TIME(0)
    if isinstance(value, list) and value:
        return DataTypes.ARRAY(python_type_of(value[0]))
    if isinstance(value, dict) and value:
        k, v = next(iter(value.items()))
        return DataTypes.MAP(python_type_of(k), python_type_of(v))
    if value is None:
        return DataTypes.NULL()
    raise TypeError(f"Cannot infer a SQL type of {type(value).__name__} value {value!r}")


_SIMPLE_TYPES: dict[str, Any] = {
    "STRING": DataTypes.STRING,
    "BOOLEAN": DataTypes.BOOLEAN,
    "BOOL": DataTypes.BOOLEAN,
    "BYTES": DataTypes.BYTES,
    "TINYINT": DataTypes.TINYINT,
    "SMALLINT": DataTypes.SMALLINT,
    "INT": DataTypes.INT,
    "INTEGER": DataTypes.INT,
    "BIGINT": DataTypes.BIGINT,
    "FLOAT": DataTypes.FLOAT,
    "REAL": DataTypes.FLOAT,
    "DOUBLE": DataTypes.DOUBLE,
    "DATE": DataTypes.DATE,
    "NULL": DataTypes.NULL,
}


class _TypeParser:
    """A recursive-descent reader of Flink's SQL type strings."""

    def __init__(self, text: str) -> None:
        import re

        self.text = text
        self.tokens: list[str] = re.findall(r"`[^`]*`|[A-Za-z_][A-Za-z_0-9]*|\d+|[<>(),]", text)
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i].upper() if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        if self.i >= len(self.tokens):
            raise ValueError(f"Unexpected end of type string {self.text!r}")
        token = self.tokens[self.i]
        if expected is not None and token.upper() != expected:
            raise ValueError(f"Expected {expected} in type string {self.text!r}, got {token!r}")
        self.i += 1
        return token

    def params(self) -> list[int]:
        if self.peek() != "(":
            return []
        self.take("(")
        values = [int(self.take())]
        while self.peek() == ",":
            self.take(",")
            values.append(int(self.take()))
        self.take(")")
        return values

    def data_type(self) -> DataType:
        name = self.take().upper()
        t: DataType
        if name in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            length = self.params() or [1 if name in ("CHAR", "BINARY") else MAX_LENGTH]
            t = getattr(DataTypes, name)(length[0])
        elif name in ("DECIMAL", "DEC", "NUMERIC"):
            p = self.params() or [10, 0]
            t = DataTypes.DECIMAL(p[0], p[1] if len(p) > 1 else 0)
        elif name == "DOUBLE":
            if self.peek() == "PRECISION":
                self.take()
            t = DataTypes.DOUBLE()
        elif name == "TIME":
            t = DataTypes.TIME((self.params() or [0])[0])
        elif name in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            precision = (self.params() or [6])[0]
            local = name == "TIMESTAMP_LTZ"
            if self.peek() in ("WITH", "WITHOUT"):
                local = self.take().upper() == "WITH" and self.peek() == "LOCAL"
                while self.peek() in ("LOCAL", "TIME", "ZONE"):
                    self.take()
            t = DataTypes.TIMESTAMP_LTZ(precision) if local else DataTypes.TIMESTAMP(precision)
        elif name in ("ARRAY", "MULTISET"):
            self.take("<")
            element = self.data_type()
            self.take(">")
            t = DataTypes.ARRAY(element) if name == "ARRAY" else DataTypes.MULTISET(element)
        elif name == "MAP":
            self.take("<")
            key = self.data_type()
            self.take(",")
            value = self.data_type()
            self.take(">")
            t = DataTypes.MAP(key, value)
        elif name == "ROW":
            close = ">" if self.peek() == "<" else ")"
            self.take("<" if close == ">" else "(")
            fields = []
            while self.peek() != close:
                field_name = self.take().strip("`")
                fields.append(DataTypes.FIELD(field_name, self.data_type()))
                if self.peek() == ",":
                    self.take(",")
            self.take(close)
            t = DataTypes.ROW(fields)
        elif name in _SIMPLE_TYPES:
            t = _SIMPLE_TYPES[name]()
        else:
            raise ValueError(f"Unknown type {name!r} in type string {self.text!r}")
        if self.peek() == "NOT":
            self.take()
            self.take("NULL")
            t = t.not_null()
        elif self.peek() == "NULL":
            self.take()
        return t


def parse_data_type(text: str) -> DataType:
    """A ``DataType`` from Flink's SQL type string (``'string'``, ``'DECIMAL(10, 2)'``,
    ``'ARRAY<INT>'``, ``'ROW<a INT, b STRING NOT NULL>'``), as PyFlink accepts for
    ``result_type``.

    >>> str(parse_data_type("row<a int, b map<string, bigint> not null>"))
    'ROW<`a` INT, `b` MAP<STRING, BIGINT> NOT NULL>'
    """
    parser = _TypeParser(text)
    t = parser.data_type()
    if parser.i != len(parser.tokens):
        raise ValueError(f"Unexpected {parser.tokens[parser.i]!r} in type string {text!r}")
    return t


def as_data_type(value: DataType | str) -> DataType:
    """A ``DataType`` as given, or parsed from its SQL string."""
    return parse_data_type(value) if isinstance(value, str) else value
