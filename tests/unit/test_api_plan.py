"""Logical plan built by the DataStream API: transformations, partitioning, keyed operators."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.api.aggregations import AccumulateReduceFunction
from cairn.common import Row, RowKind, Types
from cairn.datastream import (
    DataStream,
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeyedStream,
    KeySelector,
    MapFunction,
    ProcessFunction,
    RuntimeContext,
    SinkFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.collection import CollectionSource, CollectionSplit
from cairn.datastream.print_sink import PrintSinkFunction
from cairn.graph.job_graph import build_job_graph
from cairn.graph.transformations import (
    OneInputTransformation,
    OperatorKind,
    OperatorSpec,
    PartitionKind,
    PartitionTransformation,
    SinkTransformation,
    SourceTransformation,
    UnionTransformation,
)
from cairn.testing.processes import run_in_subprocess


def _env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()


def _op(ds: DataStream) -> OneInputTransformation:
    t = ds.get_transformation()
    assert isinstance(t, OneInputTransformation) and t.operator is not None
    return t


def _spec(ds: DataStream) -> OperatorSpec:
    spec = _op(ds).operator
    assert spec is not None
    return spec


class Double(MapFunction):
    def map(self, value: int) -> int:
        return value * 2


class Split(FlatMapFunction):
    def flat_map(self, value: str) -> Iterator[str]:
        yield from value.split()


class Positive(FilterFunction):
    def filter(self, value: int) -> bool:
        return value > 0


class Echo(ProcessFunction):
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterator[Any]:
        yield value


class KeyedSumFunction(KeyedProcessFunction[str, int, int]):  # seed 002, section 1-4
    def process_element(self, value: int, ctx: KeyedProcessFunction.Context) -> Iterator[int]:
        yield value


def test_from_collection_is_a_fixed_non_parallel_bounded_source() -> None:
    ds = _env().from_collection([1, 2, 3], type_info=Types.INT())
    t = ds.get_transformation()
    assert isinstance(t, SourceTransformation) and isinstance(t.source, CollectionSource)
    assert (t.parallelism, t.parallelism_fixed, t.bounded) == (1, True, True)
    assert ds.get_type() == Types.INT()
    with pytest.raises(ValueError, match="non parallel operator must be 1"):
        ds.set_parallelism(2)
    assert ds.set_parallelism(1) is ds


def test_collection_source_reader_resumes_from_its_snapshot() -> None:
    source = CollectionSource(iter(["a", "b", "c", "d"]))
    assert source.create_splits(4) == [CollectionSplit(0)]
    reader = source.create_reader([CollectionSplit(0)], None)  # type: ignore[arg-type]
    assert reader.poll_batch(3) == ["a", "b", "c"]
    state = reader.snapshot_state(1)
    restored = pickle.loads(pickle.dumps(source)).create_reader(state, None)
    assert restored.poll_batch(10) == ["d"] and restored.poll_batch(10) is None
    assert source.create_reader([], None).poll_batch(5) is None  # type: ignore[arg-type]


def test_one_input_operators_chain_inputs_in_call_order() -> None:
    src = _env().from_collection(["a b", "c"])
    words = src.flat_map(Split(), output_type=Types.STRING())
    lengths = words.map(len)
    kept = lengths.filter(Positive())
    echoed = kept.process(Echo())
    expected = [
        (words, "FlatMap", OperatorKind.FLAT_MAP, src),
        (lengths, "Map", OperatorKind.MAP, words),
        (kept, "Filter", OperatorKind.FILTER, lengths),
        (echoed, "Process", OperatorKind.PROCESS, kept),
    ]
    for ds, name, kind, upstream in expected:
        t, spec = _op(ds), _spec(ds)
        assert (t.name, spec.kind, t.inputs) == (name, kind, [upstream.get_transformation()])
        assert spec.key_selector is None
    assert _op(words).id < _op(lengths).id < _op(kept).id < _op(echoed).id
    assert _spec(lengths).function is len
    assert words.filter(Positive()).get_type() == Types.STRING()  # filter keeps its input type
    assert lengths.get_type() == Types.PICKLED_BYTE_ARRAY()  # PyFlink's default


def test_functions_must_match_the_operator() -> None:
    ds = _env().from_collection([1])
    with pytest.raises(TypeError, match="MapFunction or a callable"):
        ds.map(Split())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a ProcessFunction"):
        ds.process(KeyedSumFunction())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="KeySelector or a callable"):
        ds.key_by("field")  # type: ignore[arg-type]


def test_key_by_makes_every_following_operator_keyed() -> None:
    ds = _env().from_collection([("a", 1)])
    keyed = ds.key_by(lambda r: r[0], key_type=Types.STRING())
    assert isinstance(keyed, KeyedStream) and keyed.get_key_type() == Types.STRING()
    partition = keyed.get_transformation()
    assert isinstance(partition, PartitionTransformation)
    assert partition.partition is PartitionKind.HASH and partition.inputs == [
        ds.get_transformation()
    ]
    selector = partition.key_selector
    operators = {
        OperatorKind.MAP: keyed.map(Double()),
        OperatorKind.FLAT_MAP: keyed.flat_map(lambda r: [r]),
        OperatorKind.FILTER: keyed.filter(lambda r: True),
        OperatorKind.KEYED_PROCESS: keyed.process(KeyedSumFunction()),
        OperatorKind.REDUCE: keyed.reduce(lambda a, b: a),
    }
    for kind, out in operators.items():
        spec = _spec(out)
        assert (spec.kind, spec.key_selector, _op(out).inputs) == (kind, selector, [partition])
    with pytest.raises(TypeError, match="KeyedProcessFunction is required"):
        keyed.process(Echo())  # type: ignore[arg-type]


def test_key_selector_objects_are_callable() -> None:
    class First(KeySelector):
        def get_key(self, value: Any) -> Any:
            return value[0]

    keyed = _env().from_collection([("a", 1)]).key_by(First())
    selector = keyed.get_transformation().key_selector  # type: ignore[attr-defined]
    assert selector(("k", 1)) == "k"


def test_keyed_stream_rekeys_from_its_origin() -> None:
    ds = _env().from_collection([(1, 2)])
    rekeyed = ds.key_by(lambda r: r[0]).key_by(lambda r: r[1])
    assert rekeyed.get_transformation().inputs == [ds.get_transformation()]


def test_keyed_stream_is_not_an_operator_and_keeps_its_partitioning() -> None:
    keyed = _env().from_collection([1]).key_by(lambda x: x)
    for call in (
        lambda: keyed.set_parallelism(2),
        lambda: keyed.name("x"),
        lambda: keyed.uid("x"),
        lambda: keyed.disable_chaining(),
    ):
        with pytest.raises(TypeError, match="for KeyedStream is not supported"):
            call()
    for call in (keyed.rebalance, keyed.shuffle, keyed.forward, keyed.broadcast, keyed.global_):
        with pytest.raises(TypeError, match="Cannot override partitioning"):
            call()


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("rebalance", PartitionKind.REBALANCE),
        ("shuffle", PartitionKind.SHUFFLE),
        ("broadcast", PartitionKind.BROADCAST),
        ("forward", PartitionKind.FORWARD),
        ("rescale", PartitionKind.RESCALE),
        ("global_", PartitionKind.GLOBAL),
    ],
)
def test_partitionings_are_virtual_transformations(method: str, kind: PartitionKind) -> None:
    ds = _env().from_collection([1]).map(Double())
    part = getattr(ds, method)()
    t = part.get_transformation()
    assert isinstance(t, PartitionTransformation) and t.partition is kind
    assert t.inputs == [ds.get_transformation()]
    with pytest.raises(TypeError, match="not an operator"):
        part.set_parallelism(2)
    assert _op(part.map(Double())).inputs == [t]


def test_union_merges_streams_including_keyed_ones() -> None:
    env = _env()
    a, b = env.from_collection([1]), env.from_collection([2])
    keyed = env.from_collection([3]).key_by(lambda x: x)
    merged = a.union(b, keyed)
    t = merged.get_transformation()
    assert isinstance(t, UnionTransformation)
    assert t.inputs == [a.get_transformation(), b.get_transformation(), keyed.get_transformation()]
    with pytest.raises(TypeError, match="not an operator"):
        merged.uid("u")
    with pytest.raises(ValueError, match="different StreamExecutionEnvironments"):
        a.union(_env().from_collection([4]))


def test_operator_setters() -> None:
    ds = _env().from_collection([1]).map(Double())
    assert ds.name("double").uid("double-uid").set_parallelism(3).set_max_parallelism(64) is ds
    t = _op(ds)
    assert (t.name, t.uid, t.parallelism, t.parallelism_fixed, t.max_parallelism) == (
        "double",
        "double-uid",
        3,
        True,
        64,
    )
    assert ds.get_name() == "double"
    ds.set_parallelism(-1)
    assert (t.parallelism, t.parallelism_fixed) == (None, False)
    ds.disable_chaining()
    assert _spec(ds).options["chaining"] == "never"
    ds.start_new_chain().slot_sharing_group("ignored")
    assert _spec(ds).options["chaining"] == "head"
    for bad in (
        lambda: ds.set_parallelism(0),
        lambda: ds.set_max_parallelism(40_000),
        lambda: ds.uid(""),
    ):
        with pytest.raises(ValueError):
            bad()


def test_sinks_are_registered_with_the_environment() -> None:
    env = _env()
    ds = env.from_collection([1])

    class Collect(SinkFunction):
        def invoke(self, value: Any, context: Any) -> None:
            pass

    printed = ds.print("out")
    custom = ds.add_sink(Collect()).name("collect").uid("collect").set_parallelism(2)
    assert env._sinks == [printed.get_transformation(), custom.get_transformation()]
    p, c = printed.get_transformation(), custom.get_transformation()
    assert isinstance(p, SinkTransformation) and p.name == "Print to Std. Out"
    assert p.operator is not None and p.operator.kind is OperatorKind.SINK_FUNCTION
    assert isinstance(p.operator.function, PrintSinkFunction)
    assert (c.name, c.uid, c.parallelism) == ("collect", "collect", 2)
    with pytest.raises(TypeError, match="add_sink"):
        ds.add_sink(print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sink_to"):
        ds.sink_to(Collect())  # type: ignore[arg-type]


def test_sum_on_row_named_tuples_uses_field_names() -> None:
    typed = Types.ROW_NAMED(["key", "value"], [Types.STRING(), Types.INT()])
    keyed = _env().from_collection([("a", 1)], type_info=typed).key_by(lambda r: r[0])
    summed = keyed.sum("value")
    assert _spec(summed).kind is OperatorKind.REDUCE and summed.get_name() == "Reduce"
    assert _spec(summed).function.reduce(("a", 1), ("a", 2)) == ("a", 3)
    assert _op(summed).output_type == typed


@pytest.mark.parametrize(
    ("aggregation", "position", "a", "b", "expected"),
    [
        ("sum", 1, ("k", 1, "x"), ("k", 2, "y"), ("k", 3, "x")),
        ("min", 1, ("k", 5, "x"), ("k", 2, "y"), ("k", 2, "x")),
        ("max", 1, ("k", 5, "x"), ("k", 2, "y"), ("k", 5, "x")),
        ("min_by", 1, ("k", 5, "x"), ("k", 2, "y"), ("k", 2, "y")),
        ("max_by", 1, ("k", 5, "x"), ("k", 5, "y"), ("k", 5, "x")),  # first wins on ties
        ("sum", 0, 3, 4, 7),
        ("max", 0, 3, 4, 4),
        ("sum", "n", {"k": "a", "n": 1}, {"k": "a", "n": 2}, {"k": "a", "n": 3}),
        ("sum", 1, ["k", 1], ["k", 2], ["k", 3]),
        ("sum", "n", Row(k="a", n=1), Row(k="a", n=2), Row(k="a", n=3)),
    ],
)
def test_aggregations_follow_pyflink(
    aggregation: str, position: Any, a: Any, b: Any, expected: Any
) -> None:
    before = pickle.dumps((a, b))
    function = AccumulateReduceFunction(position, aggregation)
    assert function.reduce(a, b) == expected
    # BATCH folds a key's records in one pass: the same as reducing them one by one.
    assert function.fold([a, b, a]) == function.reduce(function.reduce(a, b), a)
    assert pickle.dumps((a, b)) == before  # inputs (state values) are never mutated


def test_aggregation_errors() -> None:
    with pytest.raises(TypeError, match="basic type"):
        AccumulateReduceFunction(1, "sum").reduce(1, 2)
    with pytest.raises(TypeError, match="basic type"):
        AccumulateReduceFunction(1, "sum").fold([1, 2])
    with pytest.raises(TypeError, match="ROW_NAMED"):
        AccumulateReduceFunction("value", "sum").reduce(("a", 1), ("a", 2))
    with pytest.raises(TypeError, match="int or str"):
        AccumulateReduceFunction(1.5, "sum")  # type: ignore[arg-type]


class _Context(RuntimeContext):
    """Just enough of a runtime context for a sink's open()."""

    def __init__(self, index: int, parallelism: int) -> None:
        self.index, self.parallelism = index, parallelism

    def get_task_name(self) -> str:
        return "print"

    def get_number_of_parallel_subtasks(self) -> int:
        return self.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return 128

    def get_index_of_this_subtask(self) -> int:
        return self.index

    def get_attempt_number(self) -> int:
        return 0

    def get_task_name_with_subtasks(self) -> str:
        return f"print ({self.index + 1}/{self.parallelism})"

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return default_value

    def get_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state


@pytest.mark.parametrize(
    ("identifier", "index", "parallelism", "line"),
    [
        ("out", 1, 4, "out:2> 7\n"),
        (None, 0, 2, "1> 7\n"),
        ("out", 0, 1, "out> 7\n"),
        (None, 0, 1, "7\n"),
    ],
)
def test_print_sink_prefix_like_flink(
    capsys: pytest.CaptureFixture[str],
    identifier: str | None,
    index: int,
    parallelism: int,
    line: str,
) -> None:
    sink = pickle.loads(pickle.dumps(PrintSinkFunction(identifier)))
    sink.open(_Context(index, parallelism))
    sink.invoke(7, None)
    assert capsys.readouterr().out == line


def test_print_sink_formats_rows_like_pyflink(capsys: pytest.CaptureFixture[str]) -> None:
    """A declared row prints as Flink's ``Row.toString`` (comma and space, the row kind);
    an undeclared one as PyFlink's ``str()`` of the pickled value."""
    row_type = Types.ROW([Types.STRING(), Types.INT()])
    PrintSinkFunction(type_info=row_type).invoke(Row("a", 1), None)
    update = Row("b", 2)
    update.set_row_kind(RowKind.UPDATE_AFTER)
    PrintSinkFunction(type_info=row_type).invoke(update, None)
    PrintSinkFunction().invoke(Row("a", 1), None)
    assert capsys.readouterr().out == "+I[a, 1]\n+U[b, 2]\n<Row('a', 1)>\n"


def test_keyed_process_function_is_generic_and_pickles() -> None:
    func = pickle.loads(pickle.dumps(KeyedSumFunction()))
    assert list(func.process_element(3, None)) == [3]
    assert KeyedProcessFunction[str, int, int] is not None
    assert func.on_timer(0, None) is None


def _auto_uids_of_job_b() -> list[str]:
    """A job none of whose operators has a uid, built through the API as a script would."""
    env = StreamExecutionEnvironment()
    words = env.from_collection(["a b", "c"]).flat_map(Split(), output_type=Types.STRING())
    words.key_by(lambda w: w).map(len).filter(Positive()).print()
    job = env.prepare_job("b")
    graph = build_job_graph("b", job.sinks, job.settings.parallelism, 128)
    return graph.operator_uids()


def test_auto_uids_do_not_depend_on_jobs_the_process_built_before() -> None:
    alone = run_in_subprocess(_auto_uids_of_job_b)  # a fresh interpreter: job B only
    job_a = _env().from_collection([1, 2, 3]).map(Double())
    job_a.print()
    assert _auto_uids_of_job_b() == alone  # built after job A (and this module's other jobs)
    assert alone == ["collection-source-1", "flatmap-2", "map-4", "filter-5", "print-to-std-out-6"]
