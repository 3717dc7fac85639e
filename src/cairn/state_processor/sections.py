"""What one Spark task does with keyed state sections: decode them into rows, or build them
from rows, in the heap backend's canonical format (``state.snapshot_format``).

Invariant: a section this module writes is exactly what ``HeapKeyedStateBackend`` writes for
the same state (``{"version", "states": {name: (kind, ttl, {key: value})}, "timers"}``, one
per non-empty key group, pickled without memo), so any job restores it as its own; a state
that is rewritten replaces only its own entries: the other states and the timers of the same
key group are kept as they were.

>>> b = SliceTables([StateSpec("sum", "value")], "keyed-sum")
>>> b.add(0, 5, "a", None, 3)
>>> data, ranges = encode_slice(b, {}, frozenset({"sum"}))
>>> sorted(ranges), next(state_rows(decode_file(data, ranges), "keyed-sum", "sum", "value"))
([5], ('a', 3))
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.handles import StateFileReader, StreamRange
from cairn.state.errors import CorruptStateError
from cairn.state.snapshot_format import (
    FORMAT_VERSION,
    KEYED_MAGIC,
    assemble_file,
    decode_section,
    dumps_unshared,
    read_sections,
    thaw_table,
)
from cairn.state.ttl import unwrap_ttl_table
from cairn.state_processor.errors import StateProcessorError, UnknownStateError
from cairn.state_processor.key_group_slices import KeyedSlice

__all__ = [
    "SliceTables",
    "StateSpec",
    "decode_file",
    "encode_slice",
    "read_slice",
    "state_kinds",
    "state_rows",
]

Section = dict[str, Any]


@dataclass(frozen=True)
class StateSpec:
    """A keyed state by name and kind (``"value"``, ``"list"``, ``"map"``, ...)."""

    name: str
    kind: str


def read_slice(
    piece: KeyedSlice, reader: StateFileReader, uid: str
) -> Iterator[tuple[int, Section]]:
    """The decoded sections of ``piece``'s key groups, file by file (one ranged read each).

    Raises:
        StateProcessorError: a section failed its CRC-32 or digest check, cannot be decoded
            or has an unknown format version; the message names the uid and the file.
    """
    for f in piece.files:
        try:
            raw = read_sections(reader, f.path, f.wanted, "key group")
            for kg, data in raw.items():
                section = decode_section(data, f.path, "key group", kg)
                if not isinstance(section, dict) or section.get("version") != FORMAT_VERSION:
                    raise CorruptStateError(
                        f"state file {f.path!r}, key group {kg}: not a keyed state section of "
                        f"format version {FORMAT_VERSION}"
                    )
                yield kg, section
        except (CorruptStateError, CorruptCheckpointError) as exc:
            raise StateProcessorError(f"operator uid {uid!r}: {exc}") from exc


def decode_file(data: bytes, ranges: Mapping[int, StreamRange]) -> Iterator[tuple[int, Section]]:
    """Sections of an in-memory keyed state file (tests and doctests)."""

    class _Bytes:
        def read_state_range(self, path: str, offset: int, length: int) -> bytes:
            return data[offset : offset + length]

    for kg, raw in read_sections(_Bytes(), "<memory>", ranges, "key group").items():
        yield kg, decode_section(raw, "<memory>", "key group", kg)


def _table(section: Section, uid: str, name: str, kind: str) -> dict[Any, Any] | None:
    entry = section["states"].get(name)
    if entry is None:
        return None
    stored_kind, ttl, payload = entry
    if stored_kind != kind:
        raise UnknownStateError(
            f"operator uid {uid!r}: state {name!r} is {stored_kind} state, but the "
            f"descriptor describes {kind} state"
        )
    table = thaw_table(payload)
    return unwrap_ttl_table(kind, table) if ttl else table


def state_rows(
    sections: Iterable[tuple[int, Section]],
    uid: str,
    name: str,
    kind: str,
    exploded: bool = True,
) -> Iterator[tuple[Any, ...]]:
    """Rows of state ``name``: ``(key, value)``; ``(key, user_key, value)`` for map state;
    for list state one row per element (``exploded``) or ``(key, [elements])``. Values with
    a TTL are given without their timestamps."""
    for _kg, section in sections:
        table = _table(section, uid, name, kind)
        if not table:
            continue
        if kind == "map":
            for key, entries in table.items():
                for user_key, value in entries.items():
                    yield key, user_key, value
        elif kind == "list" and exploded:
            for key, elements in table.items():
                for value in elements:
                    yield key, value
        else:
            yield from table.items()


def state_kinds(sections: Iterable[tuple[int, Section]]) -> dict[str, str]:
    """Name -> kind of every keyed state present in ``sections``."""
    kinds: dict[str, str] = {}
    for _kg, section in sections:
        for name, (kind, _ttl, _payload) in section["states"].items():
            kinds.setdefault(name, kind)
    return kinds


class SliceTables:
    """The new state of one slice, filled row by row: per state, per key group, key -> value.

    Value-like state (value, reducing, aggregating) takes one value per key; list state
    appends the elements of each list it is given; map state one value per user key.
    """

    def __init__(self, specs: Iterable[StateSpec], uid: str) -> None:
        self.specs = list(specs)
        self.uid = uid
        self.tables: list[dict[int, dict[Any, Any]]] = [{} for _ in self.specs]

    def add(self, state: int, kg: int, key: Any, user_key: Any, value: Any) -> None:
        spec = self.specs[state]
        group = self.tables[state].setdefault(kg, {})
        if spec.kind == "list":  # ``value`` is a list of elements
            if value:
                group.setdefault(key, []).extend(value)
            return
        if spec.kind == "map":
            entries = group.setdefault(key, {})
            if user_key in entries:
                raise self._duplicate(spec, f"key {key!r}, user key {user_key!r}")
            entries[user_key] = value
            return
        if value is None:  # as ValueState.update(None): no value
            return
        if key in group:
            raise self._duplicate(spec, f"key {key!r}")
        group[key] = value

    def _duplicate(self, spec: StateSpec, what: str) -> StateProcessorError:
        return StateProcessorError(
            f"operator uid {self.uid!r}, state {spec.name!r}: {what} occurs in more than one "
            f"row; {spec.kind} state holds one value per key"
        )

    def key_groups(self) -> set[int]:
        return {kg for t in self.tables for kg, group in t.items() if group}


def encode_slice(
    new: SliceTables, old: Mapping[int, Section], replaced: frozenset[str]
) -> tuple[bytes, dict[int, StreamRange]]:
    """The keyed state file of one slice: the ``new`` states, plus what ``old`` sections
    hold of other states and timers (``replaced`` names the states ``new`` replaces)."""

    def section(kg: int) -> Section:
        base = old.get(kg)
        states = (
            {} if base is None else {n: e for n, e in base["states"].items() if n not in replaced}
        )
        for spec, table in zip(new.specs, new.tables, strict=True):
            group = table.get(kg)
            if group:
                states[spec.name] = (spec.kind, False, group)
        timers = {} if base is None else base["timers"]
        return {"version": FORMAT_VERSION, "states": states, "timers": timers}

    groups = sorted(new.key_groups() | set(old))
    sections = ((kg, section(kg)) for kg in groups)
    return assemble_file(
        KEYED_MAGIC,
        ((kg, dumps_unshared(s)) for kg, s in sections if s["states"] or s["timers"]),
    )
