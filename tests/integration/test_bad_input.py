"""Bad user code and bad records at runtime: failures surface with the user's traceback, go
through the restart strategy, and are never swallowed (the API-side checks are unit tests).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from cairn.common import Configuration, JobExecutionException, JobSubmissionError
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import DataStream, StreamExecutionEnvironment
from cairn.datastream.functions import MapFunction, SourceFunction
from cairn.datastream.state import ValueStateDescriptor

RECORDS = ["1", "2", "bad", "4"] * 25


def _env(restarts: int = 0) -> StreamExecutionEnvironment:
    configuration = Configuration()
    configuration.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    if restarts:
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 50))
    else:
        env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def parse_amount(value: str) -> int:
    if not value.isdigit():
        raise ValueError(f"malformed amount {value!r}")
    return int(value)


def _fail(env: StreamExecutionEnvironment) -> tuple[str, Any]:
    """Run the job; return the error text and the job client (the job must fail)."""
    client = env.execute_async("bad-input")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.FAILED
    return str(info.value), client


def test_user_exception_carries_the_users_traceback_and_is_restarted() -> None:
    env = _env(restarts=2)
    env.from_collection(RECORDS).map(parse_amount).name("parse").print()
    message, client = _fail(env)
    assert client.job_master.restarts == 2  # every attempt hit the record, then gave up
    assert "ValueError: malformed amount 'bad'" in message
    assert "--- remote traceback ---" in message
    line = parse_amount.__code__.co_firstlineno + 2  # the raise statement
    assert f'File "{__file__}", line {line}, in parse_amount' in message
    assert os.path.basename(__file__) in message


def test_unpicklable_closure_is_rejected_before_anything_runs() -> None:
    lock = threading.Lock()
    env = _env()
    env.from_collection(RECORDS).map(lambda r: (lock, r)[1]).name("locked").print()
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(JobSubmissionError) as info:
        env.execute_async("unpicklable")
    message = str(info.value)
    assert "The function of operator 'locked'" in message
    assert f".<lambda> at {__file__}:" in message
    assert "lock" in message
    started = [t.name for t in threading.enumerate() if t.ident not in before]
    assert not [name for name in started if name.startswith("cairn-")], started


class CountPerKey(MapFunction):
    """Uses keyed state, so it only works after ``key_by``."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", None))

    def map(self, value: str) -> str:
        self.count.update((self.count.value() or 0) + 1)
        return value


def test_keyed_state_without_key_by_fails_with_a_hint() -> None:
    env = _env(restarts=1)
    env.from_collection(RECORDS).map(CountPerKey()).name("count").print()
    message, client = _fail(env)
    assert "KeyedStateAccessError" in message
    assert "after a 'key_by()' operation (operator 'count')" in message
    assert f"{__file__}" in message and "in open" in message
    assert client.job_master.restarts == 1


def test_keyed_state_after_key_by_works() -> None:
    """The control of the test above: the same function on a keyed stream."""
    env = _env()
    stream = env.from_collection(RECORDS).key_by(lambda r: r).map(CountPerKey())
    assert sorted(stream.execute_and_collect()) == sorted(RECORDS)


BAD_RECORD_JOBS: dict[str, tuple[Callable[[DataStream], DataStream], list[str]]] = {
    # a key selector runs where records are partitioned: in the upstream task
    "key-selector": (
        lambda ds: ds.key_by(lambda r: {"1": 1, "2": 2, "4": 4}[r]).map(lambda r: r),
        ["KeyError: 'bad'", "in <lambda>"],
    ),
    "flat-map-result": (
        lambda ds: ds.flat_map(lambda r: len(r) if r == "bad" else [r]),
        [
            "TypeError: FlatMap: <lambda> (test_bad_input.py:",
            "returned 3 (int), not an iterable: yield each output",
        ],
    ),
    "filter": (
        lambda ds: ds.filter(lambda r: parse_amount(r) > 1),
        ["ValueError: malformed amount 'bad'", "in parse_amount"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORD_JOBS))
def test_malformed_record_fails_the_job_instead_of_being_dropped(case: str) -> None:
    build, expected = BAD_RECORD_JOBS[case]
    env = _env()
    build(env.from_collection(RECORDS)).print()
    message, client = _fail(env)
    for text in expected:
        assert text in message
    assert client.job_master.restarts == 0


@pytest.mark.parametrize("case", sorted(BAD_RECORD_JOBS))
def test_well_formed_records_pass_the_same_functions(case: str) -> None:
    """The control: without the malformed record each pipeline above finishes."""
    build, _expected = BAD_RECORD_JOBS[case]
    good = [r for r in RECORDS if r != "bad"]
    env = _env()
    out = list(build(env.from_collection(good)).execute_and_collect())
    kept = [r for r in good if int(r) > 1] if case == "filter" else good
    assert sorted(out) == sorted(kept)


class FlakyFeed(SourceFunction):
    """A legacy source whose connection breaks after 100 records."""

    def run(self, ctx: Any) -> None:
        for i in range(100):
            with ctx.get_checkpoint_lock():
                ctx.collect(i)
        raise ConnectionError("feed went away")

    def cancel(self) -> None:
        pass


def test_failing_source_thread_is_reported_not_taken_for_the_end_of_input() -> None:
    env = _env(restarts=1)
    env.add_source(FlakyFeed()).print()
    message, client = _fail(env)
    assert "source 'Custom Source' failed: ConnectionError: feed went away" in message
    assert f'File "{__file__}"' in message and "in run" in message
    assert client.job_master.restarts == 1


def make_lock(value: str) -> Any:
    return threading.Lock()


@pytest.mark.spark
@pytest.mark.parametrize("edge", ["rebalance", "hash"])
def test_unpicklable_record_on_a_network_edge_names_operator_edge_and_type(
    spark: Any, edge: str
) -> None:
    configuration = Configuration()
    configuration.set_string("cairn.executor", "spark")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.no_restart())
    locks = env.from_collection(RECORDS).map(make_lock).name("to-lock").uid("lock-uid")
    moved = locks.rebalance() if edge == "rebalance" else locks.key_by(lambda _lock: 1)
    moved.map(lambda lock: "unreachable").name("after").print()
    message, _client = _fail(env)
    assert (
        "RecordSerializationError: A record of type _thread.lock emitted by operator 'to-lock' "
        f"(uid 'lock-uid') on the {edge} edge to 'after" in message
    )
    assert "TypeError: cannot pickle '_thread.lock' object" in message
    # the pickling error is chained as the cause
    assert "The above exception was the direct cause of the following exception" in message


def test_a_batch_over_the_frame_cap_fails_the_job_naming_the_edge() -> None:
    """Refused by the sending task, not by the receiver (which would close the connection)."""
    env = _env()
    env.configure({"cairn.network.max-frame-size": "1 mb"})
    widened = env.from_collection(list(range(600))).map(lambda i: f"{i:08d}" + "x" * 20_000)
    widened.name("widen").uid("widen-uid").rebalance().map(len).name("measure").print()
    message, _client = _fail(env)
    assert "BatchTooLarge: A batch of " in message
    assert "emitted by operator 'widen' (uid 'widen-uid') on the rebalance edge to 'measure" in (
        message
    )
    assert "over the frame size cap of 1,048,576 bytes (cairn.network.max-frame-size)" in message
