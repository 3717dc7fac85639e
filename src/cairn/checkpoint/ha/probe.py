"""The start-up proof that a store enforces its conditional writes.

Invariant: ``check_conditional`` passes only if, on a throw-away record, a second ``create``
and a ``replace`` naming a stale version were both refused (``WriteConflict``); an emulator
or S3-compatible server that applies them anyway makes high availability refuse to start
rather than run unsafely. The probe record is removed afterwards (best effort: its name is
unique, so one left behind is harmless).

>>> from cairn.checkpoint.ha.store import MemoryStore
>>> check_conditional(MemoryStore(), lambda name: None, "If-None-Match / If-Match")
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from cairn.checkpoint.ha.store import ConditionalStore, WriteConflict

__all__ = ["UnsupportedConditionalWrites", "check_conditional"]


class UnsupportedConditionalWrites(RuntimeError):
    """The server accepted a write whose precondition did not hold."""


def check_conditional(
    store: ConditionalStore, remove: Callable[[str], None], conditions: str
) -> None:
    """Raise ``UnsupportedConditionalWrites`` unless ``store`` refuses a second create and a
    replace of a stale version; ``remove(name)`` deletes the probe record, ``conditions``
    names the server's preconditions for the message."""
    probe = f".cairn-ha-probe-{uuid.uuid4().hex}"
    try:
        first = store.create(probe, b"1")
        store.replace(probe, b"2", first.version)
        for stale in (None, first.version):  # a second create, a replace of a stale version
            try:
                if stale is None:
                    store.create(probe, b"3")
                else:
                    store.replace(probe, b"4", stale)
            except WriteConflict:
                continue
            raise UnsupportedConditionalWrites(
                f"the server at {store.description} ignores {conditions} (a conditional "
                "write whose precondition failed was applied); high availability needs "
                "conditional writes"
            )
    finally:
        try:
            remove(probe)
        except Exception:  # a probe left behind is harmless: a unique name
            pass
