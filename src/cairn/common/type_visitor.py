"""One walk over type information: a method per kind of type, for every format.

Invariant: ``TypeVisitor.visit`` dispatches every type to exactly one method, chosen by its
``kind`` (``cairn.common.type_kind``), never by its class; a kind a visitor does not handle
raises ``UnsupportedTypeError`` naming the type and the visitor's format. Formats call
``visit`` once, when a schema is built, and keep the converters it returns: nothing
dispatches per record.

A type family joins by reporting ``kind`` and, per kind, the parts a method receives:
``field_names`` and ``field_types`` (ROW), ``field_types`` (TUPLE), ``element_type`` (ARRAY),
``key_type`` and ``value_type`` (MAP), and the ``name`` of a named scalar (``scalar_name``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from cairn.common.type_kind import TypeKind
from cairn.common.typeinfo import TypeInformation

__all__ = ["INTEGER_BITS", "TypeKind", "TypeVisitor", "UnsupportedTypeError", "scalar_name"]

R = TypeVar("R")

INTEGER_BITS = {"Byte": 8, "Short": 16, "Integer": 32, "Long": 64}
"""The width of each ``INTEGER`` type, by name (Java's signed integers)."""


def scalar_name(t: TypeInformation) -> str:
    """The name of a named scalar (Java's: ``"Integer"``, ``"LocalDateTime"``...), which
    refines its kind for the methods that need it (an Arrow width, a parser).

    >>> from cairn.common.typeinfo import Types
    >>> scalar_name(Types.SQL_TIMESTAMP())
    'Timestamp'
    """
    name = getattr(t, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{t!r} is not a named scalar type")
    return name


class UnsupportedTypeError(TypeError):
    """A format was given a type it does not take; the message names both."""


class TypeVisitor(Generic[R]):
    """Maps a type to an ``R`` (a converter, a column type...) with one method per kind.

    The named scalars' methods fall back to ``visit_scalar``, every method to
    ``unsupported``, so a visitor overrides what its format takes and refuses the rest by
    name:

    >>> from cairn.common.typeinfo import Types
    >>> class SqlName(TypeVisitor[str]):
    ...     format = "SQL"
    ...     def visit_scalar(self, t):
    ...         return t.kind.name
    ...     def visit_array(self, t, element):
    ...         return f"ARRAY<{self.visit(element)}>"
    ...     def visit_row(self, t, names, types):
    ...         fields = ", ".join(f"{n} {self.visit(f)}" for n, f in zip(names, types))
    ...         return f"ROW<{fields}>"
    >>> SqlName().visit(Types.ROW_NAMED(["id", "tags"], [Types.LONG(), Types.LIST(Types.STRING())]))
    'ROW<id INTEGER, tags ARRAY<STRING>>'
    >>> SqlName().visit(Types.MAP(Types.STRING(), Types.INT()))
    Traceback (most recent call last):
    ...
    cairn.common.type_visitor.UnsupportedTypeError: SQL does not take Map<String, Integer> (map)
    """

    format = "this format"
    """Named in ``UnsupportedTypeError`` (``"CSV"``, ``"Arrow (Parquet, ORC)"``...)."""

    def visit(self, t: TypeInformation) -> R:
        kind = t.kind
        if kind is None:
            return self.unsupported(t)
        parts: Any = t  # the parts its kind promises (see the module docstring)
        if kind is TypeKind.ROW:
            return self.visit_row(t, list(parts.field_names), list(parts.field_types))
        if kind is TypeKind.TUPLE:
            return self.visit_tuple(t, list(parts.field_types))
        if kind is TypeKind.ARRAY:
            return self.visit_array(t, parts.element_type)
        if kind is TypeKind.MAP:
            return self.visit_map(t, parts.key_type, parts.value_type)
        method: Callable[[TypeInformation], R] = getattr(self, _SCALAR[kind])
        return method(t)

    def unsupported(self, t: TypeInformation, why: str = "") -> R:
        """Refuse ``t`` (the default of every method); ``why`` is added to the message."""
        kind = f" ({t.kind.value})" if t.kind is not None else ""
        raise UnsupportedTypeError(f"{self.format} does not take {t!r}{kind}{why and ': ' + why}")

    # ---- composite kinds

    def visit_row(self, t: TypeInformation, names: list[str], types: list[TypeInformation]) -> R:
        return self.unsupported(t)

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> R:
        return self.unsupported(t)

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> R:
        """``LIST`` and the arrays (``BASIC_ARRAY``, ``PRIMITIVE_ARRAY``, ``OBJECT_ARRAY``),
        except ``PRIMITIVE_ARRAY(BYTE())``, which is ``visit_bytes``."""
        return self.unsupported(t)

    def visit_map(self, t: TypeInformation, key: TypeInformation, value: TypeInformation) -> R:
        return self.unsupported(t)

    # ---- scalar kinds (``t.name`` refines them: "Integer", "LocalDateTime"...)

    def visit_scalar(self, t: TypeInformation) -> R:
        """Every named scalar (a ``BasicTypeInfo``: ``t.name``) a visitor does not override
        comes here; bytes and pickled objects do not."""
        return self.unsupported(t)

    def visit_boolean(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_integer(self, t: TypeInformation) -> R:
        """Byte, Short, Integer, Long (``INTEGER_BITS``)."""
        return self.visit_scalar(t)

    def visit_big_integer(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_float(self, t: TypeInformation) -> R:
        """Float (32 bits), Double (64)."""
        return self.visit_scalar(t)

    def visit_decimal(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_string(self, t: TypeInformation) -> R:
        """String, Character (one character)."""
        return self.visit_scalar(t)

    def visit_date(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_time(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_timestamp(self, t: TypeInformation) -> R:
        """Timestamp (SQL's), LocalDateTime: a date and time without a zone."""
        return self.visit_scalar(t)

    def visit_instant(self, t: TypeInformation) -> R:
        return self.visit_scalar(t)

    def visit_bytes(self, t: TypeInformation) -> R:
        """``PRIMITIVE_ARRAY(BYTE())``: Python ``bytes`` (not a named scalar)."""
        return self.unsupported(t)

    def visit_pickled(self, t: TypeInformation) -> R:
        """``PICKLED_BYTE_ARRAY``: any Python object (not a named scalar)."""
        return self.unsupported(t)


_SCALAR = {kind: f"visit_{kind.name.lower()}" for kind in TypeKind if kind.is_scalar}
