"""The storage primitive of high availability: small records written only conditionally.

Invariant: a record changes only through ``create`` (succeeds only if the record is absent)
or ``replace`` (succeeds only if the record's version is still the one the writer read);
a writer that loses the race gets ``WriteConflict`` and nothing it wrote is visible. Every
successful write gets a version no earlier write of that record had (callers make record
contents unique, e.g. with a fencing token, so even content-derived versions never repeat).

>>> store = MemoryStore()
>>> v1 = store.create("lease", b"a")
>>> store.read("lease") == v1
True
>>> store.replace("lease", b"b", expected=v1.version).data
b'b'
>>> store.replace("lease", b"c", expected=v1.version)
Traceback (most recent call last):
...
cairn.checkpoint.ha.store.WriteConflict: record 'lease' changed since version 1 was read
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ConditionalStore", "MemoryStore", "Versioned", "WriteConflict"]


class WriteConflict(Exception):
    """A conditional write lost: the record exists (create) or changed (replace)."""


@dataclass(frozen=True, slots=True)
class Versioned:
    """A record's bytes and the opaque version that a ``replace`` must name."""

    data: bytes
    version: str


class ConditionalStore(Protocol):
    """Small records under names, written only conditionally (see the module invariant)."""

    @property
    def description(self) -> str:
        """Where the records live, for messages (a URL)."""
        ...

    def read(self, name: str) -> Versioned | None:
        """The record's current bytes and version, or None if absent."""
        ...

    def create(self, name: str, data: bytes) -> Versioned:
        """Write a new record; ``WriteConflict`` if it exists."""
        ...

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        """Overwrite the record if its version is ``expected``; else ``WriteConflict``."""
        ...


class MemoryStore:
    """A ``ConditionalStore`` in memory (versions count writes): for pure protocol tests and
    drivers sharing one process."""

    def __init__(self) -> None:
        self._records: dict[str, Versioned] = {}
        self._writes = 0
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return "memory"

    def read(self, name: str) -> Versioned | None:
        with self._lock:
            return self._records.get(name)

    def create(self, name: str, data: bytes) -> Versioned:
        with self._lock:
            if name in self._records:
                raise WriteConflict(f"record {name!r} exists")
            return self._put(name, data)

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        with self._lock:
            current = self._records.get(name)
            if current is None or current.version != expected:
                raise WriteConflict(f"record {name!r} changed since version {expected} was read")
            return self._put(name, data)

    def _put(self, name: str, data: bytes) -> Versioned:
        self._writes += 1
        record = Versioned(bytes(data), str(self._writes))
        self._records[name] = record
        return record
