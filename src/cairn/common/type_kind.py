"""The closed set of kinds a type can be, reported alike by every type family.

Invariant: every ``TypeInformation`` that ``Types`` makes reports exactly one ``TypeKind``
(``kind``), and a new type family (the Table API's ``DataTypes``) joins the formats by
reporting these kinds too, so ``common.type_visitor`` dispatches on the kind, never on a
concrete class.

>>> TypeKind.INTEGER.is_scalar, TypeKind.ROW.is_scalar
(True, False)
"""

from __future__ import annotations

from enum import Enum

__all__ = ["TypeKind"]


class TypeKind(Enum):
    """What a type is, grouped as the formats need it (the name refines a scalar kind)."""

    BOOLEAN = "boolean"
    INTEGER = "integer"  # Byte, Short, Integer, Long: signed, 8 to 64 bits
    BIG_INTEGER = "big integer"
    FLOAT = "float"  # Float, Double
    DECIMAL = "decimal"
    STRING = "string"  # String, Character
    DATE = "date"  # Date, LocalDate
    TIME = "time"  # Time, LocalTime
    TIMESTAMP = "timestamp"  # Timestamp, LocalDateTime: no time zone
    INSTANT = "instant"  # a point in time (UTC)
    BYTES = "bytes"  # PRIMITIVE_ARRAY(BYTE()): Java's byte[], Python's bytes
    ROW = "row"
    TUPLE = "tuple"
    ARRAY = "array"  # LIST and the arrays of any other element type
    MAP = "map"
    PICKLED = "pickled"  # any Python object

    @property
    def is_scalar(self) -> bool:
        return self not in _COMPOSITE


_COMPOSITE = frozenset({TypeKind.ROW, TypeKind.TUPLE, TypeKind.ARRAY, TypeKind.MAP})
