"""The key-group cache of ``KeyGroupAssigner``: bounded, FIFO-half eviction, shared per process.

Every answer must equal ``assign_to_key_group``; the cache only decides how often it is
computed.
"""

from __future__ import annotations

import gc
from typing import Any

from cairn.state import KeyGroupAssigner, assign_to_key_group


def test_assigner_evicts_its_older_half_and_stays_correct() -> None:
    assigner = KeyGroupAssigner(128, cache_size=10, shared=False)
    keys: list[Any] = [f"k{i}" for i in range(10)] + [i for i in range(5)] + [("t", 1.5), None]
    for key in keys:
        assert assigner.key_group(key) == assign_to_key_group(key, 128)
        assert len(assigner.cache) <= 10
    assert list(assigner.cache) == keys[-len(assigner.cache) :]  # newest entries kept
    assert len(assigner.cache) == 7  # evicted k0..k4 at the 11th key, k5..k9 at the 16th


def test_assigners_of_a_process_share_one_cache_while_alive() -> None:
    writer, backend = KeyGroupAssigner(256), KeyGroupAssigner(256)
    other_parallelism, private = KeyGroupAssigner(512), KeyGroupAssigner(256, shared=False)
    writer.key_group("user-1")
    assert backend.cache is writer.cache and "user-1" in backend.cache
    assert "user-1" not in other_parallelism.cache and "user-1" not in private.cache
    assert backend.key_group("user-1") == assign_to_key_group("user-1", 256)
    del writer, backend
    gc.collect()
    assert "user-1" not in KeyGroupAssigner(256).cache  # freed with its last assigner
