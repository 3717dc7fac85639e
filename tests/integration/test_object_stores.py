"""Checkpoints on Google Cloud Storage and Azure Blob Storage, each on a real server started
by the repository (fake-gcs-server, Azurite): the pre-flight check's one-line errors, state
files, RocksDB incremental checkpoints with shared files and heap checkpoints on real Spark
with workers SIGKILLed (exactly-once output), a savepoint restored at another parallelism,
the retained checkpoints listed by ``cairn checkpoints``, and the conditional writes the
high-availability lease is built on."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.errors import CheckpointStorageUnusableError
from cairn.checkpoint.ha.leader import POINTER, Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.store import WriteConflict
from cairn.checkpoint.storage import CheckpointStorage
from cairn.checkpoint.storage_access import check_storage_access
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from cairn.ids import CheckpointId
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration._object_stores import ObjectStore
from tests.integration._readme import (
    CHECKPOINTS_AZURE,
    CHECKPOINTS_GCS,
    cairn_argv,
    readme_line,
    subprocess_env,
)
from tests.integration.jobs import expected_lines, sequence_job

RECORDS, KEYS = 40_000, 10

pytestmark = [pytest.mark.slow]


@pytest.fixture(
    params=[
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def store(request: pytest.FixtureRequest) -> ObjectStore:
    server = request.getfixturevalue("fake_gcs" if request.param == "gcs" else "azurite")
    return ObjectStore(request.param, server)


# -- the pre-flight check and the files ----------------------------------------------------


def test_preflight_accepts_the_store_and_leaves_nothing_behind(store: ObjectStore) -> None:
    url = store.url("ok", "jobs")
    check_storage_access(url, store.options(url))
    assert [f for f in store.find(store.url("ok")) if ".cairn-probe" in f] == []


def test_preflight_names_a_missing_bucket_and_does_not_create_it(store: ObjectStore) -> None:
    url = store.url("ckpt").replace(store.bucket, "no-such-bucket", 1)
    what = "bucket" if store.name == "gcs" else "container"
    with pytest.raises(CheckpointStorageUnusableError, match=f"{what} 'no-such-bucket' does not"):
        check_storage_access(url, store.options(url))
    fs = store.filesystem()
    fs.invalidate_cache()
    assert not fs.exists("no-such-bucket")


@pytest.mark.azure
def test_preflight_and_submission_name_a_wrong_account_key(azurite: Any) -> None:
    store = ObjectStore("azure", azurite)
    wrong = "A" * 8 + azurite.key[8:]
    url = store.url("refused")
    key = f"fs.azure.account.key.{azurite.account}.blob.core.windows.net"
    with pytest.raises(CheckpointStorageUnusableError, match=r"access denied.*fs\.azure\.acc"):
        check_storage_access(url, store.options(url, **{key: wrong}))
    conf = Configuration()
    for k, v in {
        **store.config(**{key: wrong}),
        "execution.checkpointing.dir": url,
        "cairn.executor": "inprocess",
    }.items():
        conf.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(500)
    env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "n").map(
        lambda x: x, Types.LONG()
    ).print()
    with pytest.raises(CheckpointStorageUnusableError, match="access denied") as refused:
        env.execute("refused")
    assert "\n" not in str(refused.value)  # one line, no XML body, no request id
    assert wrong not in str(refused.value)


def test_checkpoint_files_round_trip_and_discard(store: ObjectStore) -> None:
    root = store.url("roundtrip")
    storage = CheckpointStorage(root, "job-1", store.options(root))
    writer = storage.writer(CheckpointId(7))
    rel = writer.write_state_file("keyed/op", b"0123456789")
    reader = storage.reader(writer.directory)
    assert reader.read_state_range(rel, 2, 5) == b"23456"
    chk = f"{store.path(root)}/job-1/chk-7"
    assert store.find(root) == [f"{chk}/{rel}"]
    storage.discard(CheckpointId(7))
    assert store.find(root) == []


# -- jobs ------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("backend", ["heap", "rocksdb-incremental"])
def test_sigkill_with_checkpoints_on_the_store_keeps_exactly_once(
    spark: Any, store: ObjectStore, tmp_path: Path, backend: str
) -> None:
    out = str(tmp_path / "out")
    storage = store.url("eo", backend)
    rocksdb = backend.startswith("rocksdb")
    conf = store.config(
        **{
            "cairn.executor": "spark",
            "execution.checkpointing.dir": storage,
            "state.backend.type": "rocksdb" if rocksdb else "hashmap",
            "execution.checkpointing.incremental": str(rocksdb).lower(),
            "cairn.testing.faults": (
                "point=processing,attempt=0,records=10000,subtask=1;"
                "point=during-upload,attempt=1,subtask=0"
            ),
        }
    )
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, rate=10_000, retain=True)
    client = env.execute_async(f"exactly-once-on-{store.name}")
    master = client.job_master
    job_dir = f"{storage}/{master.job_id}"
    seen: set[str] = set()

    def written(part: str) -> bool:  # checkpoints of a finished job are gone: look meanwhile
        seen.update(store.find(job_dir))
        return any(part in p for p in seen)

    wait_for(lambda: written("/_metadata"), 120, 0.1, "a completed checkpoint on the store")
    if rocksdb:
        wait_for(lambda: written("/shared/"), 120, 0.1, "RocksDB's shared files on the store")
    client.get_job_execution_result(timeout=240)
    assert master.restarts == 2, "both scheduled kills must have happened"
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)
    stats = client.get_checkpoint_statistics()
    assert stats is not None and stats.latest_completed is not None
    assert store.path(stats.latest_completed.path).startswith(store.path(job_dir) + "/chk-")
    shared = [p for p in seen if "/shared/" in p]
    assert bool(shared) == rocksdb, "RocksDB incremental keeps its files in the job's shared/"


@pytest.mark.timeout(300)
def test_savepoint_on_the_store_restores_at_another_parallelism(
    store: ObjectStore, tmp_path: Path
) -> None:
    out, records = str(tmp_path / "out"), 40_000
    conf = store.config(
        **{
            "cairn.executor": "inprocess",
            "execution.checkpointing.dir": store.url("sp-chk"),
            "state.backend.type": "rocksdb",
            "execution.checkpointing.incremental": "true",
        }
    )
    client = sequence_job(conf, out, records=records, keys=KEYS, rate=8_000).execute_async("sp-1")
    wait_for(lambda: len(read_visible_lines(out)) > 0, 120, 0.05, "committed output")
    target = store.url("savepoints", "one")
    stopped = client.stop_with_savepoint(False, target).result(timeout=120)
    assert store.path(stopped) == store.path(target)  # adlfs names the container only
    assert any(p.endswith("/_metadata") for p in store.find(target))
    first = len(read_visible_lines(out))
    assert 0 < first < records
    restored = {**conf, "execution.savepoint.path": stopped}
    sequence_job(restored, out, records=records, keys=KEYS, rate=None, parallelism=3).execute(
        "sp-2"
    )
    lines = read_visible_lines(out)
    assert check_sequence_lines(lines).violations == []
    assert sorted(lines) == expected_lines(records, KEYS)


def test_cli_lists_retained_checkpoints_on_the_store(store: ObjectStore, tmp_path: Path) -> None:
    """A cancelled job keeps its checkpoints; the docs' ``cairn checkpoints`` line lists them
    from the store with its keys given as -D options; a wrong bucket is one line."""
    storage = store.url("retained")
    conf = store.config(**{"cairn.executor": "inprocess", "execution.checkpointing.dir": storage})
    env = sequence_job(
        conf, str(tmp_path / "out"), records=10_000_000, keys=KEYS, rate=20_000, retain=True
    )
    client = env.execute_async(f"retained-on-{store.name}")
    master = client.job_master
    wait_for(
        lambda: (master.coordinator.latest_completed_id() or 0) >= 2,
        120,
        0.05,
        "two completed checkpoints",
    )
    client.cancel()
    with contextlib.suppress(Exception):
        client.get_job_execution_result(timeout=60)
    on_store = [p for p in store.find(f"{storage}/{master.job_id}") if p.endswith("/_metadata")]
    assert on_store
    server = store.server
    if store.name == "gcs":
        line = readme_line(CHECKPOINTS_GCS)
        places = {"gs://my-bucket/checkpoints": storage, "http://127.0.0.1:4443": server.endpoint}
    else:
        line = readme_line(CHECKPOINTS_AZURE)
        places = {
            "abfs://checkpoints@devstoreaccount1.dfs.core.windows.net/jobs": storage,
            "http://127.0.0.1:10000/devstoreaccount1": server.endpoint,
            "devstoreaccount1": server.account,
            "$ACCOUNT_KEY": server.key,
        }
    argv = cairn_argv(line, **places)
    cli = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, timeout=120, env=subprocess_env(tmp_path)
    )
    assert cli.returncode == 0, cli.stderr
    listed = [c for c in json.loads(cli.stdout) if c["job_id"] == master.job_id]
    ids = {int(p.split("/chk-")[1].split("/")[0]) for p in on_store}
    assert {c["id"] for c in listed if c["usable"]} == ids
    wrong = [a.replace(storage, storage.replace(store.bucket, "nobucket", 1)) for a in argv]
    refused = subprocess.run(
        wrong, capture_output=True, text=True, timeout=120, env=subprocess_env(tmp_path)
    )
    assert refused.returncode != 0
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "nobucket" in refused.stderr and "no such" in refused.stderr


# -- conditional writes: the leader lease -----------------------------------------------------


def test_the_store_enforces_both_preconditions(store: ObjectStore) -> None:
    ha = store.conditional_store("ha-contract")
    ha.check_conditional()  # the probe the HA services run at start
    assert ha.read("r") is None
    v1 = ha.create("r", b"one")
    with pytest.raises(WriteConflict):
        ha.create("r", b"again")
    v2 = ha.replace("r", b"two", v1.version)
    with pytest.raises(WriteConflict):
        ha.replace("r", b"stale", v1.version)
    assert ha.read("r") == v2
    with pytest.raises(WriteConflict):
        ha.replace("absent", b"x", v1.version)


def test_concurrent_conditional_writes_have_one_winner(store: ObjectStore) -> None:
    ha = store.conditional_store("ha-race")

    def create(name: str, i: int) -> bool:
        try:
            ha.create(name, b"c%d" % i)
            return True
        except WriteConflict:
            return False

    def replace(name: str, expected: str, i: int) -> bool:
        try:
            ha.replace(name, b"r%d" % i, expected)
            return True
        except WriteConflict:
            return False

    for round_ in range(3):
        name = f"r{round_}"
        with ThreadPoolExecutor(6) as pool:
            created = list(pool.map(create, [name] * 6, range(6)))
        assert created.count(True) == 1
        record = ha.read(name)
        assert record is not None
        with ThreadPoolExecutor(6) as pool:
            replaced = list(pool.map(replace, [name] * 6, [record.version] * 6, range(6)))
        assert replaced.count(True) == 1


def test_lease_takeover_and_fencing_on_the_store(store: ObjectStore) -> None:
    a = Leadership(store.conditional_store("ha-lease"), "a", 1_500, 500)
    b = Leadership(store.conditional_store("ha-lease"), "b", 1_500, 500)
    assert a.acquire(threading.Event(), "job", "g") is not None
    a.checkpoint_completed(CheckpointId(4), store.url("c", "chk-4"))
    # a never renews (as if paused): b takes over after the lease, a is fenced afterwards.
    takeover = b.acquire(threading.Event(), "job", "g")
    assert takeover is not None and takeover.waited and takeover.token == 2
    assert takeover.previous is not None and takeover.previous.checkpoint_id == 4
    assert not a.holds()
    record = b.store.read(POINTER)
    assert record is not None and Pointer.decode(record.data).token == 2


def test_exclusive_metadata_write_refuses_a_second_one(store: ObjectStore) -> None:
    from cairn.checkpoint.locations import atomic_write, resolve

    url = store.url("exclusive", "chk-1", "_metadata")
    loc = resolve(url, store.options(url))
    atomic_write(loc, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(loc, b"second", exclusive=True)
    assert loc.fs.cat_file(loc.path) == b"first"
