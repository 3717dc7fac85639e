"""Recovery edge cases: restoring from retained checkpoints of a cancelled job (newest one
corrupt: the fallback past a committed checkpoint is refused unless allowed; none usable,
another parallelism, an explicit ``chk-<n>`` path, a job whose operators changed), automatic
recovery past a damaged checkpoint, and crashes right after a restore; the committed output
is compared with the golden output, record by record (a duplicate fails).

A first run is cancelled while its rate-limited source is mid-way; a second run of the same
job restores from the first run's retained checkpoints and writes into the same directory.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.common import JobExecutionException
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.stream_execution_environment import (
    reset_context_defaults,
    set_context_defaults,
)
from cairn.deploy.job_master_client import JobClient
from cairn.testing.sequence_jobs import (
    SequenceCheck,
    check_sequence_lines,
    read_visible_lines,
)
from tests.integration.jobs import (
    check_to_files,
    environment,
    exactly_once_problems,
    expected_lines,
    sequence_job,
    sequence_source,
)
from tests.integration.waits import completed_checkpoints

RECORDS, KEYS = 60_000, 12  # 12 keys: every parallelism used here divides it
RESTORE_KEY = "execution.state-recovery.path"


@dataclass(frozen=True)
class FirstRun:
    job_dir: Path
    retained: list[int]  # ids of the retained checkpoints, oldest first
    lines: list[str]  # output committed before the cancellation
    out: str


def _conf(**extra: str) -> dict[str, str]:
    return {"cairn.executor": "inprocess", "execution.checkpointing.num-retained": "2", **extra}


def _first_run(
    tmp_path: Path, parallelism: int = 2, conf: dict[str, str] | None = None
) -> FirstRun:
    """Run at ``parallelism`` until three checkpoints completed, then cancel (retained)."""
    out = str(tmp_path / "out")
    env = sequence_job(
        _conf(**(conf or {})),
        out,
        records=RECORDS,
        keys=KEYS,
        parallelism=parallelism,
        rate=20_000,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
        retain=True,
    )
    client = env.execute_async("recovery-first-run")
    completed_checkpoints(client, 3, timeout=30)
    client.cancel()
    client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.CANCELED
    lines = read_visible_lines(out)
    assert 0 < len(lines) < RECORDS, "the first run must end mid-way"
    coordinator = client.job_master.coordinator
    assert coordinator is not None
    retained = [int(c.checkpoint_id) for c in coordinator.completed_checkpoints()]
    assert len(retained) == 2
    return FirstRun(tmp_path / "chk" / client.get_job_id(), retained, lines, out)


def _second_run(
    tmp_path: Path,
    first: FirstRun,
    parallelism: int = 2,
    restore: str | None = None,
    conf: dict[str, str] | None = None,
) -> JobClient:
    extra = dict(conf or {})
    if restore is not None:
        extra[RESTORE_KEY] = restore
    env = sequence_job(
        _conf(**extra),
        first.out,
        records=RECORDS,
        keys=KEYS,
        parallelism=parallelism,
        rate=None,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
        retain=True,
    )
    client = env.execute_async("recovery-second-run")
    client.get_job_execution_result(timeout=60)
    return client


def _restored_id(client: JobClient) -> int | None:
    restored = client.get_checkpoint_statistics().snapshot().latest_restored
    return None if restored is None else int(restored.checkpoint_id)


def _chk(first: FirstRun, checkpoint_id: int) -> Path:
    return first.job_dir / f"chk-{checkpoint_id}"


# --------------------------------------------------------------------------- fallback


def _truncate_metadata(chk: Path) -> None:
    with open(chk / "_metadata", "r+b") as f:
        f.truncate(12)


def _remove_a_state_file(chk: Path) -> None:
    state_files = sorted(p for p in chk.iterdir() if p.name.startswith("keyed-"))
    assert state_files, f"no keyed state file in {chk}"
    state_files[0].unlink()


CORRUPTIONS = {"truncated-metadata": _truncate_metadata, "missing-state-file": _remove_a_state_file}


ALLOW_FALLBACK = "cairn.recovery.allow-fallback-past-committed"


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_falling_back_past_a_committed_checkpoint_is_refused(
    tmp_path: Path, corruption: str
) -> None:
    first = _first_run(tmp_path)
    older, newest = first.retained
    CORRUPTIONS[corruption](_chk(first, newest))
    # The first run completed the newest checkpoint (it has _metadata), so its file sink may
    # have committed that checkpoint's output: restoring the older one would write it again.
    with pytest.raises(JobExecutionException) as info:
        _second_run(tmp_path, first, restore=str(first.job_dir))
    message = str(info.value)
    assert f"refusing to fall back past checkpoint {newest} ({_chk(first, newest)})" in message
    assert f"after checkpoint {older} (up to checkpoint {newest}) a second time" in message
    assert f"{ALLOW_FALLBACK}: true" in message
    # Nothing ran: the output is the first run's, each record once.
    lines = read_visible_lines(first.out)
    assert sorted(lines) == sorted(first.lines)
    assert check_sequence_lines(lines).duplicates == {}


def test_fallback_past_a_committed_checkpoint_on_request_writes_its_output_again(
    tmp_path: Path,
) -> None:
    first = _first_run(tmp_path)
    older, newest = first.retained
    _truncate_metadata(_chk(first, newest))
    client = _second_run(tmp_path, first, restore=str(first.job_dir), conf={ALLOW_FALLBACK: "true"})
    assert client.get_job_status() is JobStatus.FINISHED
    assert _restored_id(client) == older
    lines = read_visible_lines(first.out)
    report = check_sequence_lines(lines)
    # Restored keyed state and source positions belong to the same checkpoint: no key skips
    # or repeats a sequence number within either run, and every sum matches.
    assert report.violations == [] and report.bad_sums == []
    # As documented: the output the first run committed after the older checkpoint is
    # written once more (as in Flink when restoring an older checkpoint), no more, no less.
    assert report.duplicates, "the opt-in fallback must replay committed output"
    assert set(report.duplicates.values()) == {1}
    assert set(report.duplicates) <= set(first.lines)
    _assert_duplicates_are_a_suffix_of_the_first_run(list(report.duplicates), first.lines)
    problems = exactly_once_problems(lines, RECORDS, KEYS)
    assert len(problems) == 1 and problems[0].startswith(f"{len(report.duplicates)} duplicated")
    assert _hidden_files(first.out) == []  # no in-progress leftovers of either run


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
@pytest.mark.parametrize("allow", [False, True], ids=["refused", "allowed"])
def test_automatic_recovery_past_a_committed_checkpoint(tmp_path: Path, allow: bool) -> None:
    """A worker dies after the newest retained checkpoint's _metadata was damaged (after its
    completion was announced): recovery must not silently restore an older checkpoint."""
    out = str(tmp_path / "out")
    conf = _conf(
        **{
            "execution.checkpointing.num-retained": "3",
            "cairn.testing.faults": "point=processing,attempt=0,records=15000,subtask=1",
            **({ALLOW_FALLBACK: "true"} if allow else {}),
        }
    )
    env = sequence_job(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        rate=20_000,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("fallback-past-committed")
    damaged: list[int] = []

    def damage_newest(event: str, payload: object) -> None:
        if event == "restart" and not damaged:  # the job master is about to restore
            newest = client.job_master.coordinator.latest_completed()
            assert newest is not None
            damaged.append(int(newest.checkpoint_id))
            _truncate_metadata(Path(newest.directory.removeprefix("file://")))

    client.job_master.listeners.append(damage_newest)
    if not allow:
        with pytest.raises(JobExecutionException) as info:
            client.get_job_execution_result(timeout=60)
        assert client.get_job_status() is JobStatus.FAILED
        (newest,) = damaged
        assert f"refusing to fall back past checkpoint {newest} " in str(info.value)
        assert "a second time" in str(info.value)
        report = check_sequence_lines(read_visible_lines(out))
        assert report.ok and 0 < report.lines < RECORDS  # no duplicate, no gap: a prefix
        return
    client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.FINISHED
    (newest,) = damaged
    assert _restored_id(client) == newest - 1
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert report.duplicates and set(report.duplicates.values()) == {1}
    assert sorted(set(lines)) == expected_lines(RECORDS, KEYS)


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_automatic_recovery_past_a_same_size_corrupt_state_file(
    tmp_path: Path, backend: str
) -> None:
    """A worker dies; before the restore a byte of the newest checkpoint's largest state file
    changes (same size). The job master checks only sizes of its own checkpoints: the workers
    find the CRC-32 mismatch, naming the file, and the next attempt restores the older
    checkpoint, without using up the restart strategy's single restart."""
    out = str(tmp_path / "out")
    conf = _conf(
        **{
            "state.backend.type": backend,
            "execution.checkpointing.num-retained": "3",
            "cairn.testing.faults": "point=processing,attempt=0,records=15000,subtask=1",
            ALLOW_FALLBACK: "true",
        }
    )
    env = sequence_job(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        rate=20_000,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
        restarts=1,
    )
    client = env.execute_async("corrupt-on-failover")
    damaged: list[tuple[int, str]] = []
    failures: list[str] = []

    def damage_newest(event: str, payload: object) -> None:
        if event != "restart":
            return
        failures.append(str(payload))
        if damaged:
            return
        newest = client.job_master.coordinator.latest_completed()
        assert newest is not None
        local = newest.metadata.referenced_files()
        victim = max((f for f in local if "/" not in f), key=lambda f: local[f])
        damaged.append((int(newest.checkpoint_id), victim))
        path = Path(newest.directory.removeprefix("file://")) / victim
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    client.job_master.listeners.append(damage_newest)
    client.get_job_execution_result(timeout=90)
    assert client.get_job_status() is JobStatus.FINISHED
    ((newest, victim),) = damaged
    assert _restored_id(client) == newest - 1
    # Attempt 0 failed (the fault), attempt 1 could not restore the damaged checkpoint.
    assert len(failures) == 2 and client.job_master.restarts == 2
    assert victim in failures[1] and "CRC-32" in failures[1]
    init = client.job_master.last_initialization
    assert init is not None and init.checkpoint_id == newest - 1 and init.state_bytes > 0
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(set(lines)) == expected_lines(RECORDS, KEYS)


def _hidden_files(directory: str) -> list[str]:
    return sorted(
        f for _root, _dirs, files in os.walk(directory) for f in files if f.startswith(".")
    )


def _assert_duplicates_are_a_suffix_of_the_first_run(
    duplicates: list[str], first_lines: list[str]
) -> None:
    def seqs(lines: list[str]) -> dict[str, list[int]]:
        per_key: dict[str, list[int]] = defaultdict(list)
        for line in lines:
            key, seq, _ = line.split(",")
            per_key[key].append(int(seq))
        return per_key

    last_of_first_run = {k: max(v) for k, v in seqs(first_lines).items()}
    for key, dup in seqs(duplicates).items():
        dup.sort()
        assert dup == list(range(dup[0], last_of_first_run[key] + 1)), key


def test_no_usable_checkpoint_fails_naming_every_candidate(tmp_path: Path) -> None:
    first = _first_run(tmp_path)
    older, newest = first.retained
    _truncate_metadata(_chk(first, newest))
    _remove_a_state_file(_chk(first, older))
    with pytest.raises(JobExecutionException) as info:
        _second_run(tmp_path, first, restore=str(first.job_dir))
    message = str(info.value)
    assert f"{first.job_dir}/chk-{newest}/_metadata: truncated metadata" in message
    assert f"{first.job_dir}/chk-{older}/keyed-" in message and "is missing" in message
    # Nothing ran: no output beyond the first run's.
    assert sorted(read_visible_lines(first.out)) == sorted(first.lines)


# --------------------------------------------------------------------------- rescale


@pytest.mark.parametrize(
    ("backend", "old_parallelism", "new_parallelism"),
    [("hashmap", 2, 3), ("hashmap", 2, 1), ("rocksdb", 2, 3), ("rocksdb", 3, 2)],
)
def test_rescaled_restore_matches_the_golden_output(
    tmp_path: Path, backend: str, old_parallelism: int, new_parallelism: int
) -> None:
    conf = {"state.backend.type": backend}
    first = _first_run(tmp_path, parallelism=old_parallelism, conf=conf)
    client = _second_run(
        tmp_path, first, parallelism=new_parallelism, restore=str(first.job_dir), conf=conf
    )
    assert client.get_job_status() is JobStatus.FINISHED
    assert _restored_id(client) == first.retained[-1]
    assert {v.parallelism for v in client.job_master.graph.vertices} == {new_parallelism}
    lines = read_visible_lines(first.out)
    assert sorted(lines) == expected_lines(RECORDS, KEYS)


# --------------------------------------------------------------------------- explicit path


@pytest.fixture
def context_defaults() -> Iterator[None]:
    yield
    reset_context_defaults()


def test_restore_from_an_explicit_checkpoint_directory(
    tmp_path: Path, context_defaults: None
) -> None:
    first = _first_run(tmp_path)
    newest = first.retained[-1]
    set_context_defaults(restore_path=str(_chk(first, newest)))  # what `cairn run -s` sets
    client = _second_run(tmp_path, first)
    assert client.get_job_status() is JobStatus.FINISHED
    assert _restored_id(client) == newest
    assert sorted(read_visible_lines(first.out)) == expected_lines(RECORDS, KEYS)
    # Where the restore's time went: measured by the job master and each worker.
    init = client.job_master.last_initialization
    assert init is not None and init.checkpoint_id == newest
    assert init.state_bytes > 0 and 0 <= init.state_read_ms <= init.initialize_state_ms
    assert 0 <= init.choose_ms <= init.total_ms
    history = client.get_checkpoint_statistics().snapshot().history
    assert min(s.checkpoint_id for s in history) == newest + 1  # numbering continues
    assert _hidden_files(first.out) == []  # the first run's in-progress files are gone
    # The second job does not own the checkpoints it restored from: they stay.
    assert not (tmp_path / "chk" / client.get_job_id()).exists()
    for cid in first.retained:
        assert (_chk(first, cid) / "_metadata").is_file()


# --------------------------------------------------------------------------- changed jobs


def _renamed_check_job(conf: dict[str, str], out: str) -> StreamExecutionEnvironment:
    """The sequence job of ``sequence_job`` whose keyed check got a new uid."""
    env = environment(conf)
    env.enable_checkpointing(100)
    env.set_restart_strategy(RestartStrategies.no_restart())
    check_to_files(sequence_source(env, KEYS, RECORDS), SequenceCheck(), "sequence-check-v2", out)
    return env


@pytest.mark.parametrize("ignore_unclaimed", [False, True])
def test_state_of_an_operator_missing_from_the_job_is_never_dropped_silently(
    tmp_path: Path, ignore_unclaimed: bool
) -> None:
    first = _first_run(tmp_path)
    conf = _conf(
        **{
            RESTORE_KEY: str(first.job_dir),
            "execution.state-recovery.ignore-unclaimed-state": str(ignore_unclaimed),
        }
    )
    client = _renamed_check_job(conf, first.out).execute_async("renamed")
    if not ignore_unclaimed:
        with pytest.raises(JobExecutionException) as info:
            client.get_job_execution_result(timeout=60)
        message = str(info.value)
        assert "operator uid 'sequence-check'" in message
        assert "execution.state-recovery.ignore-unclaimed-state" in message
        assert sorted(read_visible_lines(first.out)) == sorted(first.lines)
        return
    client.get_job_execution_result(timeout=60)
    assert _restored_id(client) == first.retained[-1]
    # As asked: the source resumed, the check started empty, so each key's first record
    # after the restore is reported out of sequence exactly once.
    report = check_sequence_lines(read_visible_lines(first.out))
    assert sorted(v.split(",")[0] for v in report.violations) == [f"!k{k:05d}" for k in range(KEYS)]


def test_restore_with_another_max_parallelism_is_refused(tmp_path: Path) -> None:
    first = _first_run(tmp_path)
    conf = _conf(**{RESTORE_KEY: str(first.job_dir), "pipeline.max-parallelism": "256"})
    env = sequence_job(
        conf,
        first.out,
        records=RECORDS,
        keys=KEYS,
        rate=None,
        checkpoint_dir=str(tmp_path / "chk"),
        retain=True,
    )
    client = env.execute_async("max-parallelism-changed")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=60)
    message = str(info.value)
    expected = "operator uid 'sequence-check' has keyed state written with max parallelism 128"
    assert expected in message
    assert "the job uses 256" in message
    assert sorted(read_visible_lines(first.out)) == sorted(first.lines)


# --------------------------------------------------------------------------- crash after restore


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
def test_crashes_right_after_restores_keep_exactly_once(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    faults = (
        "point=processing,attempt=0,records=15000,subtask=1;"
        "point=processing,attempt=1,records=1,subtask=0;"  # first batch after the restore
        "point=processing,attempt=2,records=1,subtask=1"
    )
    env = sequence_job(
        {"cairn.executor": "inprocess", "cairn.testing.faults": faults},
        out,
        records=RECORDS,
        keys=KEYS,
        rate=40_000,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("crash-after-restore")
    client.get_job_execution_result(timeout=60)
    assert client.job_master.restarts == 3
    assert client.get_checkpoint_statistics().counts.restored == 3
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
    assert not os.path.exists(tmp_path / "chk" / client.get_job_id())


def test_incremental_rocksdb_checkpoints_keep_exactly_the_referenced_shared_files(
    tmp_path: Path,
) -> None:
    """Incremental RocksDB checkpoints of a cancelled run: the job's shared directory holds
    exactly the files its retained checkpoints reference, the newest reuses files of older
    ones, and a rescaled run restores from them to the golden output."""
    from cairn.checkpoint.handles import SHARED_PATH_PREFIX, RocksDBKeyedStateHandle
    from cairn.checkpoint.storage import load_checkpoint

    conf = {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}
    first = _first_run(tmp_path, parallelism=2, conf=conf)
    handles = [
        h
        for cid in first.retained
        for op in load_checkpoint(str(_chk(first, cid))).metadata.operators.values()
        for sub in op.subtasks.values()
        for h in sub.keyed
        if isinstance(h, RocksDBKeyedStateHandle)
    ]
    referenced = {f.path for h in handles for f in h.shared_files()}
    on_storage = {SHARED_PATH_PREFIX + p.name for p in (first.job_dir / "shared").iterdir()}
    assert referenced and on_storage == referenced
    assert any(h.base_checkpoint_id is not None for h in handles)  # files were reused
    assert any(h.checkpointed_size < h.size for h in handles)
    client = _second_run(tmp_path, first, parallelism=3, restore=str(first.job_dir), conf=conf)
    assert _restored_id(client) == first.retained[-1]
    assert sorted(read_visible_lines(first.out)) == expected_lines(RECORDS, KEYS)
