"""Type information with PyFlink's names (``pyflink.common.typeinfo``).

Invariant: Cairn ships Python objects with cloudpickle, so a ``TypeInformation`` is a hint on
the plan, never checked on the record path. Where PyFlink's types change values, Cairn does the
same once, when the job is defined: ``from_collection(elements, type_info)`` converts and checks
the elements (``cairn.common.type_conversion``: tuples become ``Row``s under ``ROW``...);
``project`` needs a ``TUPLE`` type; ``print`` formats by type as Java would; ``ROW_NAMED`` names
tuple fields for ``KeyedStream.sum("field")``.

>>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
RowTypeInfo(word: String, count: Integer)
>>> Types.TUPLE([Types.STRING(), Types.LONG()]) == Types.TUPLE([Types.STRING(), Types.LONG()])
True
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.common.type_kind import TypeKind

__all__ = [
    "BasicArrayTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "ObjectArrayTypeInfo",
    "PickledBytesTypeInfo",
    "PrimitiveArrayTypeInfo",
    "RowTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
]


class TypeInformation:
    """Base of all type hints; equal when they describe the same type.

    ``kind`` is what ``cairn.common.type_visitor`` dispatches on (``None``: a hint that no
    format knows).
    """

    @property
    def kind(self) -> TypeKind | None:
        return None

    def _key(self) -> tuple[object, ...]:
        return (type(self).__name__,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeInformation) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return type(self).__name__

    def __str__(self) -> str:
        return repr(self)


class BasicTypeInfo(TypeInformation):
    """A scalar type (``Types.INT()``, ``Types.STRING()``...), named as in Java."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def kind(self) -> TypeKind | None:
        return _BASIC_KINDS.get(self.name)

    def _key(self) -> tuple[object, ...]:
        return ("basic", self.name)

    def __repr__(self) -> str:
        return self.name


class PickledBytesTypeInfo(TypeInformation):
    """Any picklable Python object (PyFlink's default when no type is given)."""

    @property
    def kind(self) -> TypeKind | None:
        return TypeKind.PICKLED

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"


class RowTypeInfo(TypeInformation):
    """A ``Row`` with typed, optionally named fields (default names ``f0``, ``f1``...)."""

    def __init__(
        self, field_types: Sequence[TypeInformation], field_names: Sequence[str] | None = None
    ) -> None:
        self.field_types = list(field_types)
        names = list(field_names) if field_names is not None else None
        if names is None:
            names = [f"f{i}" for i in range(len(self.field_types))]
        if len(names) != len(self.field_types):
            raise ValueError(
                f"ROW_NAMED needs one name per field type: {len(names)} names, "
                f"{len(self.field_types)} types"
            )
        self.field_names = names

    @property
    def kind(self) -> TypeKind | None:
        return TypeKind.ROW

    def get_field_names(self) -> list[str]:
        return list(self.field_names)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def get_field_index(self, field_name: str) -> int:
        """Position of ``field_name``, or ``-1`` when there is no such field (as in PyFlink)."""
        try:
            return self.field_names.index(field_name)
        except ValueError:
            return -1

    def _key(self) -> tuple[object, ...]:
        return ("row", tuple(self.field_types), tuple(self.field_names))

    def __repr__(self) -> str:
        pairs = zip(self.field_names, self.field_types, strict=True)
        fields = ", ".join(f"{n}: {t!r}" for n, t in pairs)
        return f"RowTypeInfo({fields})"


class TupleTypeInfo(TypeInformation):
    """A Python tuple with typed positions."""

    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        self.field_types = list(field_types)

    @property
    def kind(self) -> TypeKind | None:
        return TypeKind.TUPLE

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def _key(self) -> tuple[object, ...]:
        return ("tuple", tuple(self.field_types))

    def __repr__(self) -> str:
        return f"TupleTypeInfo({', '.join(repr(t) for t in self.field_types)})"


class _ElementTypeInfo(TypeInformation):
    _label = "Element"

    def __init__(self, element_type: TypeInformation) -> None:
        self.element_type = element_type

    @property
    def kind(self) -> TypeKind | None:
        return TypeKind.ARRAY

    def _key(self) -> tuple[object, ...]:
        return (self._label, self.element_type)

    def __repr__(self) -> str:
        return f"{self._label}<{self.element_type!r}>"


class ListTypeInfo(_ElementTypeInfo):
    _label = "List"


class BasicArrayTypeInfo(_ElementTypeInfo):
    _label = "BasicArray"


class PrimitiveArrayTypeInfo(_ElementTypeInfo):
    _label = "PrimitiveArray"

    @property
    def kind(self) -> TypeKind | None:
        byte = isinstance(self.element_type, BasicTypeInfo) and self.element_type.name == "Byte"
        return TypeKind.BYTES if byte else TypeKind.ARRAY


class ObjectArrayTypeInfo(_ElementTypeInfo):
    _label = "ObjectArray"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        self.key_type = key_type
        self.value_type = value_type

    @property
    def kind(self) -> TypeKind | None:
        return TypeKind.MAP

    def _key(self) -> tuple[object, ...]:
        return ("map", self.key_type, self.value_type)

    def __repr__(self) -> str:
        return f"Map<{self.key_type!r}, {self.value_type!r}>"


_BASIC_KINDS = {
    "String": TypeKind.STRING,
    "Character": TypeKind.STRING,
    "Boolean": TypeKind.BOOLEAN,
    "Byte": TypeKind.INTEGER,
    "Short": TypeKind.INTEGER,
    "Integer": TypeKind.INTEGER,
    "Long": TypeKind.INTEGER,
    "BigInteger": TypeKind.BIG_INTEGER,
    "Float": TypeKind.FLOAT,
    "Double": TypeKind.FLOAT,
    "BigDecimal": TypeKind.DECIMAL,
    "Date": TypeKind.DATE,
    "LocalDate": TypeKind.DATE,
    "Time": TypeKind.TIME,
    "LocalTime": TypeKind.TIME,
    "Timestamp": TypeKind.TIMESTAMP,
    "LocalDateTime": TypeKind.TIMESTAMP,
    "Instant": TypeKind.INSTANT,
}


def _basic(name: str) -> BasicTypeInfo:
    return BasicTypeInfo(name)


class Types:
    """Factories for the common type hints, as in PyFlink (``Types.INT()`` etc.)."""

    @staticmethod
    def STRING() -> TypeInformation:
        return _basic("String")

    @staticmethod
    def BYTE() -> TypeInformation:
        return _basic("Byte")

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return _basic("Boolean")

    @staticmethod
    def SHORT() -> TypeInformation:
        return _basic("Short")

    @staticmethod
    def INT() -> TypeInformation:
        return _basic("Integer")

    @staticmethod
    def LONG() -> TypeInformation:
        return _basic("Long")

    @staticmethod
    def FLOAT() -> TypeInformation:
        return _basic("Float")

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return _basic("Double")

    @staticmethod
    def CHAR() -> TypeInformation:
        return _basic("Character")

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return _basic("BigInteger")

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return _basic("BigDecimal")

    @staticmethod
    def INSTANT() -> TypeInformation:
        return _basic("Instant")

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return _basic("Date")

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return _basic("Time")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return _basic("Timestamp")

    @staticmethod
    def LOCAL_DATE() -> TypeInformation:
        return _basic("LocalDate")

    @staticmethod
    def LOCAL_TIME() -> TypeInformation:
        return _basic("LocalTime")

    @staticmethod
    def LOCAL_DATE_TIME() -> TypeInformation:
        return _basic("LocalDateTime")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: Sequence[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(
        field_names: Sequence[str], field_types: Sequence[TypeInformation]
    ) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: Sequence[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> BasicArrayTypeInfo:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> PrimitiveArrayTypeInfo:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> ObjectArrayTypeInfo:
        return ObjectArrayTypeInfo(element_type)
