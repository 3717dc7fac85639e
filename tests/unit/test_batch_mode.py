"""BATCH runtime mode on the in-process executor: the same bounded jobs give STREAMING's
results (a rolling aggregate: its final value per key), keyed state and timers per key,
timers that cannot loop, clear failures, restarts, and no checkpoints."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from cairn.batch.plan import BatchModeError
from cairn.common import Encoder, JobStatus, RestartStrategies, Types, WatermarkStrategy
from cairn.common.exceptions import JobExecutionException
from cairn.datastream import (
    KeyedProcessFunction,
    RuntimeExecutionMode,
    SourceFunction,
    StreamExecutionEnvironment,
)
from tests.unit.batch_jobs import (
    EVENTS,
    JOBS,
    ROLLING,
    Endless,
    collect,
    environment,
    events,
    final_per_key,
    word_count,
)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_batch_gives_the_streaming_result_on_the_same_bounded_input(name: str) -> None:
    job = JOBS[name]
    streaming = collect(job, "STREAMING")
    batch = collect(job, "BATCH")
    assert streaming and batch
    if name in ROLLING:
        # STREAMING emits every intermediate value; BATCH each key's final one, once.
        assert len(batch) == len({r[0] for r in batch})
        assert final_per_key(batch) == final_per_key(streaming)
        assert len(streaming) > len(batch)
    else:
        assert Counter(batch) == Counter(streaming)


def test_word_count_in_batch_counts_each_word_once() -> None:
    counts = dict(collect(word_count, "BATCH"))
    assert counts["to"] == 9 and counts["the"] == 9 and counts["fortune"] == 3


class _Timers(KeyedProcessFunction[Any, Any, Any]):
    """Processing-time timers (never due in a short job) and a timer that re-registers
    itself each time it fires (a loop, were the end of a key not quiesced)."""

    def process_element(self, value: Any, ctx: Any) -> None:
        timers = ctx.timer_service()
        timers.register_processing_time_timer(timers.current_processing_time() + 3_600_000)
        timers.register_event_time_timer(value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> list[Any]:
        ctx.timer_service().register_event_time_timer(timestamp + 1)
        watermark = ctx.timer_service().current_watermark()
        return [(ctx.get_current_key(), ctx.time_domain().name, watermark)]


def test_timers_fire_at_the_end_of_their_key_and_cannot_loop() -> None:
    def job(env: Any) -> Any:
        return events(env, EVENTS[:20]).key_by(lambda e: e[0]).process(_Timers())

    fired = collect(job, "BATCH")
    by_domain = Counter((key, domain) for key, domain, _ in fired)
    keys = {e[0] for e in EVENTS[:20]}
    # Each key: one event-time timer per distinct timestamp, its processing-time timers
    # (deduplicated by timestamp) at the end of the key too; none registered while firing.
    assert {k for k, _ in by_domain} == keys
    for key in keys:
        stamps = {e[1] for e in EVENTS[:20] if e[0] == key}
        assert by_domain[(key, "EVENT_TIME")] == len(stamps)
        assert by_domain[(key, "PROCESSING_TIME")] >= 1
    assert {w for _, _, w in fired} == {2**63 - 1}  # time has jumped to the end


def test_an_unbounded_source_is_refused_before_anything_runs() -> None:
    env = environment("BATCH")
    env.add_source(Endless()).print()
    with pytest.raises(BatchModeError, match="BATCH needs bounded sources; unbounded: "):
        env.execute_async("endless")


class _Finite(SourceFunction):
    """A legacy source: unbounded to the planner (as in Flink), though it ends."""

    def run(self, ctx: Any) -> None:
        for word in ["a", "b", "a"]:
            ctx.collect((word, 1))

    def cancel(self) -> None:
        pass


def test_automatic_runs_batch_when_every_source_is_bounded() -> None:
    def sums(env: StreamExecutionEnvironment, bounded: bool) -> list[Any]:
        words = [("a", 1), ("b", 1), ("a", 1)]
        source = env.from_collection(words) if bounded else env.add_source(_Finite())
        return list(source.key_by(lambda w: w[0]).sum(1).execute_and_collect())

    # BATCH emits each key's final sum once; STREAMING every running sum.
    assert sorted(sums(environment("AUTOMATIC"), bounded=True)) == [("a", 2), ("b", 1)]
    assert sorted(sums(environment("AUTOMATIC"), bounded=False)) == [("a", 1), ("a", 2), ("b", 1)]


def _fails_on(value: str) -> str:
    if value == "bad":
        raise ValueError(f"malformed value {value!r}")
    return value


def test_a_user_exception_carries_the_users_traceback() -> None:
    env = environment("BATCH")
    env.from_collection(["a", "bad", "c"]).map(_fails_on).name("parse").print()
    client = env.execute_async("bad input")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=60)
    message = str(info.value)
    assert client.get_job_status() is JobStatus.FAILED
    assert "ValueError: malformed value 'bad'" in message
    assert "--- remote traceback ---" in message
    line = _fails_on.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in _fails_on' in message


def test_a_failed_stage_is_rerun_from_its_inputs(tmp_path: Any) -> None:
    marker = tmp_path / "failed-once"

    def fail_once(pair: Any) -> Any:
        if not os.path.exists(marker):
            marker.write_text("x")
            raise OSError("a lost executor")
        return pair

    env = environment("BATCH")
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    stream = word_count(env).map(fail_once)
    client_records = list(stream.execute_and_collect())
    assert dict(client_records) == dict(collect(word_count, "BATCH"))
    assert marker.exists()


def test_checkpointing_is_ignored_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    env = environment("BATCH")
    env.enable_checkpointing(50)
    word_count(env).print()
    with caplog.at_level("INFO", logger="cairn.datastream.job_builder"):
        settings = env.prepare_job("checkpointed batch").settings
    assert settings.batch and not settings.checkpoint.enabled
    assert "BATCH takes no checkpoints" in caplog.text


def _word_count_example(env: Any, source: Any, sink: Any) -> None:
    """The shape of Flink's PyFlink ``word_count.py`` (BATCH, parallelism 1, a generator
    split, a declared tuple type, key_by + reduce, a file sink or print)."""

    def split(line: str) -> Any:
        yield from line.split()

    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(1)
    ds = (
        env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "file_source")
        .flat_map(split)
        .map(lambda i: (i, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda i: i[0])
        .reduce(lambda i, j: (i[0], i[1] + j[1]))
    )
    if sink is None:
        ds.print()
    else:
        ds.sink_to(sink)
    env.execute()


def test_a_word_count_example_style_job_runs_in_batch_with_pyflinks_names(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.datastream.connectors import (
        FileSink,
        FileSource,
        OutputFileConfig,
        RollingPolicy,
        StreamFormat,
    )

    text = tmp_path / "in.txt"
    text.write_text("to be or\nnot to be\n")

    def source() -> Any:
        return (
            FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(text))
            .process_static_file_set()
            .build()
        )

    sink = (
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("prefix").with_part_suffix(".ext").build()
        )
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )
    conf = {"cairn.executor": "inprocess"}
    _word_count_example(StreamExecutionEnvironment.get_execution_environment(conf), source(), sink)
    parts = sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert parts and all(p.name.startswith("prefix-") and p.suffix == ".ext" for p in parts)
    lines = [line for p in parts for line in p.read_text().splitlines()]
    assert sorted(lines) == ["(be,2)", "(not,1)", "(or,1)", "(to,2)"]  # once per word

    capsys.readouterr()
    _word_count_example(StreamExecutionEnvironment.get_execution_environment(conf), source(), None)
    assert sorted(capsys.readouterr().out.splitlines()) == ["(be,2)", "(not,1)", "(or,1)", "(to,2)"]
