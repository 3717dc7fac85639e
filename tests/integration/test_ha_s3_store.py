"""The S3 conditional-write store against a real SeaweedFS server: If-None-Match: * and
If-Match are enforced, races have one winner, and the lease protocol runs on it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.checkpoint.ha.leader import POINTER, Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.s3_store import S3Store
from cairn.checkpoint.ha.store import WriteConflict
from cairn.ids import CheckpointId
from cairn.testing.seaweedfs import SeaweedS3

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _store(seaweed: SeaweedS3, prefix: str) -> S3Store:
    return S3Store(seaweed.filesystem(), f"{seaweed.bucket}/{prefix}")


def test_seaweedfs_enforces_both_preconditions(seaweed: SeaweedS3) -> None:
    store = _store(seaweed, "ha-contract")
    store.check_conditional()  # the probe the HA services run at start
    assert store.read("r") is None
    v1 = store.create("r", b"one")
    with pytest.raises(WriteConflict):
        store.create("r", b"again")
    v2 = store.replace("r", b"two", v1.version)
    with pytest.raises(WriteConflict):
        store.replace("r", b"stale", v1.version)
    assert store.read("r") == v2
    with pytest.raises(WriteConflict):
        store.replace("absent", b"x", v1.version)


def test_concurrent_conditional_puts_have_one_winner(seaweed: SeaweedS3) -> None:
    store = _store(seaweed, "ha-race")

    def create(name: str, i: int) -> bool:
        try:
            store.create(name, b"c%d" % i)
            return True
        except WriteConflict:
            return False

    def replace(name: str, expected: str, i: int) -> bool:
        try:
            store.replace(name, b"r%d" % i, expected)
            return True
        except WriteConflict:
            return False

    for round_ in range(5):
        name = f"r{round_}"
        with ThreadPoolExecutor(8) as pool:
            created = list(pool.map(create, [name] * 8, range(8)))
        assert created.count(True) == 1
        record = store.read(name)
        assert record is not None
        with ThreadPoolExecutor(8) as pool:
            replaced = list(pool.map(replace, [name] * 8, [record.version] * 8, range(8)))
        assert replaced.count(True) == 1


def test_takeover_and_fencing_on_s3(seaweed: SeaweedS3) -> None:
    a = Leadership(_store(seaweed, "ha-lease"), "a", duration_ms=1_500, renew_interval_ms=500)
    b = Leadership(_store(seaweed, "ha-lease"), "b", duration_ms=1_500, renew_interval_ms=500)
    assert a.acquire(threading.Event(), "job", "g") is not None
    a.checkpoint_completed(CheckpointId(4), "s3://cairn/c/chk-4")
    # a never renews (as if paused): b takes over after the lease, a is fenced afterwards.
    takeover = b.acquire(threading.Event(), "job", "g")
    assert takeover is not None and takeover.waited and takeover.token == 2
    assert takeover.previous is not None and takeover.previous.checkpoint_id == 4
    assert not a.holds()
    record = b.store.read(POINTER)
    assert record is not None and Pointer.decode(record.data).token == 2


def test_exclusive_metadata_write_refuses_a_second_one(seaweed: SeaweedS3) -> None:
    from cairn.checkpoint.locations import atomic_write, resolve
    from cairn.common.storage_options import s3_storage_options

    options = s3_storage_options({**seaweed.flink_config(), "s3.path.style.access": True})
    loc = resolve(seaweed.url("ha-exclusive", "chk-1", "_metadata"), options)
    atomic_write(loc, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(loc, b"second", exclusive=True)
    assert loc.fs.cat_file(loc.path) == b"first"
