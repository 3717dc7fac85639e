"""Checking a restoring job's keyed state descriptors against what a snapshot recorded.

Invariant: a descriptor is compatible with a recorded ``KeyedStateSchema`` when it has the
same kind and, for every type slot where both declared a type (untyped and pickled state
hold any picklable value), the same type. These are pure functions; the operator context
applies them when a function registers its state (``OperatorContext.declare_keyed_state``).

>>> from cairn.common.typeinfo import Types
>>> from cairn.api.state import MapStateDescriptor, ValueStateDescriptor
>>> old = schema_of(ValueStateDescriptor("sum", Types.LONG()))
>>> old
KeyedStateSchema(kind='value', types=('Long',))
>>> incompatibility(old, schema_of(ValueStateDescriptor("sum", None))) is None
True
>>> incompatibility(old, schema_of(ValueStateDescriptor("sum", Types.STRING())))
'the value type is Long in the snapshot but String in the job'
>>> incompatibility(old, schema_of(MapStateDescriptor("sum", Types.STRING(), Types.LONG())))
'it is value state of Long in the snapshot but map state of String -> Long in the job'
"""

from __future__ import annotations

from typing import Any

from cairn.checkpoint.handles import KeyedStateSchema

__all__ = ["describe", "incompatibility", "schema_of"]

_ANY = frozenset({None, "PickledByteArrayTypeInfo"})  # holds any picklable value
_SLOTS = {"map": ("user key", "value"), "list": ("element",)}


def schema_of(descriptor: Any) -> KeyedStateSchema:
    """What a snapshot records of ``descriptor`` (a keyed ``StateDescriptor``)."""
    kind = str(descriptor.kind)
    if kind == "map":
        infos: tuple[Any, ...] = (descriptor.key_type_info, descriptor.value_type_info)
    else:
        infos = (descriptor.type_info,)
    return KeyedStateSchema(kind, tuple(None if t is None else repr(t) for t in infos))


def describe(schema: KeyedStateSchema) -> str:
    """``"map state of String -> Long"``, ``"value state"`` (no type declared)."""
    declared = [t or "any" for t in schema.types]
    if all(t in _ANY for t in schema.types):
        return f"{schema.kind} state"
    return f"{schema.kind} state of {' -> '.join(declared)}"


def incompatibility(old: KeyedStateSchema, new: KeyedStateSchema) -> str | None:
    """Why state recorded as ``old`` cannot be restored as ``new``, or ``None``."""
    if old.kind != new.kind or len(old.types) != len(new.types):
        return f"it is {describe(old)} in the snapshot but {describe(new)} in the job"
    slots = _SLOTS.get(old.kind, ("value",))
    for slot, a, b in zip(slots, old.types, new.types, strict=False):
        if a not in _ANY and b not in _ANY and a != b:
            return f"the {slot} type is {a} in the snapshot but {b} in the job"
    return None
