"""The HDFS conditional store against a real HDFS (Hadoop's MiniDFSCluster): a rename onto a
taken name is refused by the NameNode, races have one winner, records are private, the lease
protocol runs on it, and ``high-availability.storageDir`` on hdfs:// opens it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.checkpoint.ha.hdfs_store import HdfsStore
from cairn.checkpoint.ha.leader import POINTER, Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.store import WriteConflict
from cairn.deploy.high_availability import open_store
from cairn.ids import CheckpointId
from cairn.testing.hdfs import HdfsCluster

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]


def _store(hdfs: HdfsCluster, prefix: str) -> HdfsStore:
    return HdfsStore(hdfs.filesystem(), f"/ha/{prefix}")


def test_the_namenode_refuses_both_and_records_are_private(hdfs: HdfsCluster) -> None:
    store = open_store(hdfs.url("ha", "contract"), {})  # what the HA services open, probed
    assert isinstance(store, HdfsStore)
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
    fs = hdfs.filesystem()
    modes = {
        p: int(fs.info(p)["permission"]) & 0o777 for p in fs.find("/ha/contract", withdirs=True)
    }
    assert modes and all(m == (0o700 if fs.isdir(p) else 0o600) for p, m in modes.items()), {
        p: oct(m) for p, m in modes.items()
    }
    assert not [p for p in modes if ".cairn-ha-probe" in p or ".inprogress-" in p]


def test_concurrent_conditional_renames_have_one_winner(hdfs: HdfsCluster) -> None:
    store = _store(hdfs, "race")

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

    for round_ in range(3):
        name = f"r{round_}"
        with ThreadPoolExecutor(6) as pool:
            created = list(pool.map(create, [name] * 6, range(6)))
        assert created.count(True) == 1
        record = store.read(name)
        assert record is not None
        with ThreadPoolExecutor(6) as pool:
            replaced = list(pool.map(replace, [name] * 6, [record.version] * 6, range(6)))
        assert replaced.count(True) == 1
        latest = store.read(name)
        assert latest is not None and latest.data.startswith(b"r")


def test_takeover_and_fencing_on_hdfs(hdfs: HdfsCluster) -> None:
    a = Leadership(_store(hdfs, "lease"), "a", duration_ms=1_500, renew_interval_ms=500)
    b = Leadership(_store(hdfs, "lease"), "b", duration_ms=1_500, renew_interval_ms=500)
    assert a.acquire(threading.Event(), "job", "g") is not None
    a.checkpoint_completed(CheckpointId(4), hdfs.url("c", "chk-4"))
    # a never renews (as if paused): b takes over after the lease, a is fenced afterwards.
    takeover = b.acquire(threading.Event(), "job", "g")
    assert takeover is not None and takeover.waited and takeover.token == 2
    assert takeover.previous is not None and takeover.previous.checkpoint_id == 4
    assert not a.holds()
    record = b.store.read(POINTER)
    assert record is not None and Pointer.decode(record.data).token == 2
