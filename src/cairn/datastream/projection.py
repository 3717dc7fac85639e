"""``DataStream.project(*field_indexes)``: keep some fields of tuple records, in a new order.

Invariant: as in PyFlink, only a stream typed ``Types.TUPLE`` can be projected, and the check
happens when the job is defined: the indexes must be ints inside the tuple's arity, and the
result is typed with the kept fields' types (so it can be projected or summed again).

>>> from cairn.common.typeinfo import Types
>>> p = Projection.of(Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]), (2, 0))
>>> p.map(("a", 1, 10)), p.output_type
((10, 'a'), TupleTypeInfo(Long, String))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.api.functions import MapFunction
from cairn.common.typeinfo import TupleTypeInfo, TypeInformation

__all__ = ["Projection"]


class Projection(MapFunction):
    """The map function behind ``project``: a tuple of the record's kept fields."""

    def __init__(self, field_indexes: Sequence[int], output_type: TupleTypeInfo) -> None:
        self.field_indexes = tuple(field_indexes)
        self.output_type = output_type

    @staticmethod
    def of(input_type: TypeInformation | None, field_indexes: Sequence[Any]) -> Projection:
        """Check ``field_indexes`` against ``input_type`` (a stream's type).

        Raises:
            TypeError: the stream is not typed as a tuple, or an index is not an int.
            IndexError: an index is outside the tuple.
        """
        if not isinstance(input_type, TupleTypeInfo):
            raise TypeError(
                "Only Tuple DataStreams can be projected: this stream's type is "
                f"{input_type if input_type is not None else 'not declared (pickled)'}; give "
                "its operator output_type=Types.TUPLE([...]) (or from_collection its type_info)"
            )
        if not field_indexes:
            raise ValueError("project() needs at least one field index")
        types = input_type.get_field_types()
        for i in field_indexes:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"project() takes int field indexes, got {i!r}")
            if not 0 <= i < len(types):
                raise IndexError(
                    f"project(): field index {i} is outside the tuple of {len(types)} fields "
                    f"({input_type})"
                )
        return Projection(field_indexes, TupleTypeInfo([types[i] for i in field_indexes]))

    def map(self, value: Any) -> tuple[Any, ...]:
        return tuple([value[i] for i in self.field_indexes])

    def __repr__(self) -> str:
        return f"Projection{self.field_indexes}"
