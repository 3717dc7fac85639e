"""How a driver starts once it leads (``deploy/high_availability.await_leadership``), over
an in-memory HA store with real ``Leadership`` objects: what it resumes, when it starts
afresh, and when a standby ends without running the job."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace

from cairn.checkpoint.ha.leader import POINTER, Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.store import MemoryStore
from cairn.common.job_status import JobStatus
from cairn.datastream import StreamExecutionEnvironment
from cairn.deploy.high_availability import End, Lead, await_leadership
from cairn.graph.job_graph import JobGraph, build_job_graph
from cairn.ids import CheckpointId, JobId
from cairn.settings import CheckpointSettings, JobSettings, RerunPolicy

JOB = JobId("j" * 32)


def _job() -> tuple[JobGraph, JobSettings, str]:
    env = StreamExecutionEnvironment()
    env.from_collection([1, 2]).map(lambda x: x).print()
    prepared = env.prepare_job("ha-takeover")
    s = prepared.settings
    graph = build_job_graph(s.job_name, prepared.sinks, 1, s.max_parallelism)
    storage = f"memory://test-ha-takeover/{uuid.uuid4().hex}"
    settings = JobSettings(s.job_name, 1, checkpoint=CheckpointSettings(storage_url=storage))
    return graph, settings, f"{storage}/{JOB}"


def _driver(store: MemoryStore, name: str) -> Leadership:
    return Leadership(store, name, duration_ms=200, renew_interval_ms=50)


def _start(driver: Leadership, settings: JobSettings | None = None) -> Lead | End:
    graph, default, job_dir = _job()
    return await_leadership(driver, threading.Event(), JOB, graph, settings or default, job_dir)


def test_the_first_leader_has_no_pointer_to_go_by() -> None:
    start = _start(_driver(MemoryStore(), "a"))
    assert start == Lead(None, CheckpointId(1), decided=False)


def test_a_new_leader_resumes_the_pointers_checkpoint_and_numbers_past_it() -> None:
    store = MemoryStore()
    a = _driver(store, "a")
    assert isinstance(_start(a), Lead)
    a.checkpoint_completed(CheckpointId(7), "memory://x/chk-7")
    start = _start(_driver(store, "b"))  # a stopped renewing: b waits out the lease
    assert isinstance(start, Lead)
    assert start.restore_path == "memory://x/chk-7" and start.decided
    assert start.first_id >= 7 + 1 + 1  # past what a still-running a may have in flight


def test_a_standby_whose_leader_finished_ends_finished_without_running() -> None:
    store = MemoryStore()
    a = _driver(store, "a")
    assert isinstance(_start(a), Lead)
    a.checkpoint_completed(CheckpointId(3), "memory://x/chk-3")
    b = _driver(store, "b")
    b.look()  # b was started while a led: it is a standby
    a.finish("FINISHED")
    start = _start(b)
    assert isinstance(start, End) and start.status is JobStatus.FINISHED
    record = store.read(POINTER)
    assert record is not None and Pointer.decode(record.data).status == "FINISHED"
    assert b.role == "released"


def test_a_later_driver_starts_a_finished_job_afresh_unless_forced() -> None:
    store = MemoryStore()
    a = _driver(store, "a")
    assert isinstance(_start(a), Lead)
    a.checkpoint_completed(CheckpointId(3), "memory://x/chk-3")
    a.finish("FINISHED")
    c = _driver(store, "c")
    later = _start(c)
    assert isinstance(later, Lead) and later.restore_path is None and later.decided
    c.finish("FINISHED")  # c's run finished too (before any checkpoint of its own)
    _, settings, _ = _job()
    forced = _start(_driver(store, "d"), replace(settings, on_rerun=RerunPolicy.FORCE_RESUME))
    assert isinstance(forced, Lead) and forced.restore_path == "memory://x/chk-3"


def test_refuse_ends_failed_and_leaves_the_pointer_to_the_next_driver() -> None:
    store = MemoryStore()
    a = _driver(store, "a")
    assert isinstance(_start(a), Lead)
    a.checkpoint_completed(CheckpointId(4), "memory://x/chk-4")
    _, settings, _ = _job()
    refused = _start(_driver(store, "b"), replace(settings, on_rerun=RerunPolicy.REFUSE))
    assert isinstance(refused, End) and refused.status is JobStatus.FAILED
    assert "chk-4" in refused.reason
    resumed = _start(_driver(store, "c"))
    assert isinstance(resumed, Lead) and resumed.restore_path == "memory://x/chk-4"


def test_on_standby_runs_once_while_waiting_and_never_for_a_first_leader() -> None:
    store = MemoryStore()
    a = _driver(store, "a")
    calls: list[str] = []
    a.on_standby.append(lambda: calls.append("a"))
    assert isinstance(_start(a), Lead) and calls == []  # led at once: nothing to warm
    b = _driver(store, "b")
    b.on_standby.append(lambda: calls.append("b"))
    assert isinstance(_start(b), Lead)  # a stopped renewing: b stood by, then took over
    assert calls == ["b"] and b.role == "leader"
