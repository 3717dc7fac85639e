"""The key-context half of a keyed state backend, shared by the heap and RocksDB backends.

Invariant: ``set_current_key`` leaves the backend's ``KeyContext`` at the key and its key group
(hashed at most once per key through the process-wide key-group cache, or taken from the
caller), which every state object of the backend reads; reading the current key outside a
keyed context raises ``StateAccessError`` naming the state.
"""

from __future__ import annotations

from typing import Any

from cairn.state.key_groups import KeyGroupAssigner, KeyGroupRange
from cairn.state.keyed_states import NO_KEY, KeyContext, raise_no_key

__all__ = ["KeyContextOwner"]


class KeyContextOwner:
    """``set_current_key`` and its readers for a backend that sets ``_ctx``, ``_range``,
    ``_max_parallelism``, ``_assigner`` and ``_key_group_cache`` (the assigner's cache)."""

    _ctx: KeyContext
    _range: KeyGroupRange
    _max_parallelism: int
    _assigner: KeyGroupAssigner
    _key_group_cache: dict[Any, int]

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self._range

    @property
    def max_parallelism(self) -> int:
        return self._max_parallelism

    def set_current_key(self, key: Any, key_group: int | None = None) -> None:
        """Make ``key`` current; pass ``key_group`` if already known to skip hashing."""
        if key_group is None:
            try:
                key_group = self._key_group_cache.get(key)
            except TypeError:
                raise TypeError(
                    f"keys must be hashable, got {type(key).__name__}: use a tuple, not a list"
                ) from None
            if key_group is None:
                key_group = self._assigner.key_group(key)
        ctx = self._ctx
        ctx.key_group = key_group
        ctx.key = key

    def clear_current_key(self) -> None:
        self._ctx.key = NO_KEY

    def get_current_key(self) -> Any:
        key = self._ctx.key
        if key is NO_KEY:
            raise_no_key("<current key>")
        return key

    @property
    def current_key_group(self) -> int:
        self.get_current_key()
        return self._ctx.key_group
