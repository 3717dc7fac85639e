"""Side outputs' tags (``pyflink.datastream.output_tag.OutputTag``).

Invariant: a tag is identified by its ``tag_id`` alone (two tags with the same id name the same
side output, as in PyFlink); it is an immutable, picklable value.

>>> from cairn.common import Types
>>> late = OutputTag("late-data", Types.TUPLE([Types.STRING(), Types.LONG()]))
>>> late.tag_id, late == OutputTag("late-data")
('late-data', True)
"""

from __future__ import annotations

from typing import Any

from cairn.common.typeinfo import RowTypeInfo, TypeInformation, Types

__all__ = ["OutputTag"]


class OutputTag:
    """A named, typed side output: ``yield tag, value`` in a process function, then
    ``stream.get_side_output(tag)``."""

    __slots__ = ("tag_id", "type_info")

    def __init__(self, tag_id: str, type_info: TypeInformation | list[Any] | None = None) -> None:
        if not tag_id or not isinstance(tag_id, str):
            raise ValueError("OutputTag tag_id cannot be None or empty string")
        self.tag_id = tag_id
        if type_info is None:
            self.type_info: TypeInformation = Types.PICKLED_BYTE_ARRAY()
        elif isinstance(type_info, list):
            self.type_info = RowTypeInfo(type_info)
        elif isinstance(type_info, TypeInformation):
            self.type_info = type_info
        else:
            raise TypeError(f"Unsupported type_info: {type_info!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r}, {self.type_info!r})"

    def __getstate__(self) -> tuple[str, TypeInformation]:
        return self.tag_id, self.type_info

    def __setstate__(self, state: tuple[str, TypeInformation]) -> None:
        self.tag_id, self.type_info = state
