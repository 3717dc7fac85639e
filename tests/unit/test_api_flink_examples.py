"""What Flink's own PyFlink DataStream examples (``flink-python/pyflink/examples/datastream``)
need beyond the rest of the API, each as a small job of our own on the in-process executor:
window function contexts subscripted with the window type, the file connector's builder parts
imported from ``cairn.datastream.connectors``, and ``FileSink`` with the simple string encoder
writing a declared type's values as the Java text PyFlink's Java sink writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.common import Encoder, Row, Time, Types, WatermarkStrategy
from cairn.common.watermark_strategy import TimestampAssigner
from cairn.datastream import (
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.java_text import java_text, with_declared_type
from cairn.datastream.window import TimeWindow, TumblingEventTimeWindows


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    return env


class _Second(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class _CountPerWindow(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    # Annotated as Flink's examples do: the context subscripted with the window type.
    def process(
        self, key: str, context: ProcessWindowFunction.Context[TimeWindow], elements: Any
    ) -> list[tuple]:
        return [(key, context.window().start, context.window().end, len(list(elements)))]


def test_window_function_contexts_take_the_window_type_as_in_pyflink(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ProcessAllWindowFunction.Context[TimeWindow] is not None
    env = _env()
    ticks = [("hi", t) for t in (1, 2, 3, 4, 5, 8, 9, 15)]
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Second())
    (
        env.from_collection(ticks, Types.TUPLE([Types.STRING(), Types.INT()]))
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda x: x[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5)))
        .process(_CountPerWindow(), Types.TUPLE([Types.STRING()] + [Types.INT()] * 3))
        .print()
    )
    env.execute("tumbling windows")
    assert capsys.readouterr().out.splitlines() == ["(hi,0,5,4)", "(hi,5,10,3)", "(hi,15,20,1)"]


def test_the_connectors_package_exports_the_file_connector_parts_as_pyflink() -> None:
    from cairn.datastream import connectors
    from cairn.datastream.connectors import file_system

    for name in (
        "FileSink",
        "FileSource",
        "FileSourceBuilder",
        "OutputFileConfig",
        "RollingPolicy",
        "StreamFormat",
        "BucketAssigner",
    ):
        assert getattr(connectors, name) is getattr(file_system, name), name
    assert set(connectors.__all__) <= set(dir(connectors))
    with pytest.raises(AttributeError, match="KafkaSource"):
        _ = connectors.KafkaSource


def test_word_count_from_a_file_to_part_files_with_prefix_suffix_and_java_text(
    tmp_path: Path,
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
    env = _env()
    env.enable_checkpointing(100)
    source = (
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
    (
        env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "file_source")
        .flat_map(lambda line: line.split())
        .map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda i: i[0])
        .reduce(lambda i, j: (i[0], i[1] + j[1]))
        .sink_to(sink)
    )
    env.execute("word count")
    parts = sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert parts and all(p.name.startswith("prefix-") and p.suffix == ".ext" for p in parts)
    lines = [line for p in parts for line in p.read_text().splitlines()]
    assert lines == ["(to,1)", "(be,1)", "(or,1)", "(not,1)", "(to,2)", "(be,2)"]
    assert type(sink.encoder).__name__ == "SimpleStringEncoder", "the user's sink is unchanged"


def test_java_text_is_what_the_java_object_of_a_declared_type_prints() -> None:
    row = Types.ROW_NAMED(["word", "ok"], [Types.STRING(), Types.BOOLEAN()])
    assert java_text(Row("word", "ok")("a", True), row) == "+I[a, true]"
    nested = Types.TUPLE([Types.STRING(), Types.LIST(Types.INT()), Types.BOOLEAN()])
    assert java_text(("x", [1, 2], False), nested) == "(x,[1, 2],false)"
    assert java_text({"k": None}, Types.MAP(Types.STRING(), Types.STRING())) == "{k=null}"
    assert java_text(("a", 1), None) == "('a', 1)", "an undeclared value keeps its str()"
    plain = Encoder.simple_string_encoder()
    assert with_declared_type(plain, Types.STRING()) is plain, "no sink: nothing to change"


def test_table_api_names_not_built_yet_are_refused_at_import_naming_them() -> None:
    with pytest.raises(ImportError, match=r"cairn\.table\.CsvTableSource: not in Cairn's Table"):
        from cairn.table import CsvTableSource  # noqa: F401
    import cairn.table

    assert not hasattr(cairn.table, "__wrapped__"), "module protocol lookups stay AttributeErrors"


def test_async_io_imports_and_model_inference_is_refused() -> None:
    # Flink's asyncio/remote_model_inference.py imports these; text_embedding_example.py infer().
    from cairn.datastream import AsyncDataStream, AsyncRetryStrategy, async_retry_predicates

    assert callable(AsyncDataStream.unordered_wait_with_retry)
    assert callable(AsyncRetryStrategy.fixed_delay)
    assert async_retry_predicates.exception_type_predicate(TimeoutError(), TimeoutError)
    from cairn.datastream import window  # submodules still import through the package

    assert window.TumblingEventTimeWindows is TumblingEventTimeWindows
    stream = _env().from_collection([{"id": 1, "text": "flink"}])
    with pytest.raises(TypeError, match=r"infer\(\) is not supported"):
        stream.infer(model="m", input_col="text", output_col="embedding")
