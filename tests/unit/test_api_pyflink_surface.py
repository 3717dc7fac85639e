"""The rest of PyFlink's DataStream surface (issue 13, item 7), run on the in-process executor
and compared with PyFlink's documented behaviour: ``from_collection`` converting with its
type info, ``Row``, ``KeyedStream.sum/min/max/min_by/max_by`` by position and by name,
``project``, ``partition_custom``, ``set_uid_hash`` (refused at submission, named),
``execute_and_collect(limit=...)`` and ``print``'s format."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from cairn.common import Row, RowKind, Types
from cairn.common.exceptions import JobSubmissionError
from cairn.datastream import (
    CloseableIterator,
    MapFunction,
    Partitioner,
    StreamExecutionEnvironment,
)


def _env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(parallelism)
    return env


def _per_key(records: list[Any]) -> dict[Any, list[Any]]:
    """Outputs grouped by key (field 0), each key's in emission order."""
    grouped: dict[Any, list[Any]] = defaultdict(list)
    for r in records:
        grouped[r[0]].append(r)
    return dict(grouped)


# ---------------------------------------------------------------- from_collection and Row


def test_from_collection_with_row_types_gives_rows_with_field_names() -> None:
    env = _env(1)
    named = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
    out = env.from_collection([("flink", 1), {"word": "spark", "count": 2}], named)
    rows = out.execute_and_collect(limit=2)
    word_count = Row("word", "count")  # a factory of rows with these names, in this order
    assert rows == [word_count("flink", 1), word_count("spark", 2)]
    assert rows[0] != Row("flink", 1), "as in PyFlink, field names take part in equality"
    first = rows[0]
    assert isinstance(first, Row) and first.word == "flink" and first["count"] == 1
    assert first[0] == "flink" and first.as_dict() == {"word": "flink", "count": 1}
    assert first.get_row_kind() is RowKind.INSERT
    plain = _env(1).from_collection([("a", 1)], Types.ROW([Types.STRING(), Types.INT()]))
    assert plain.execute_and_collect(limit=1)[0].as_dict() == {"f0": "a", "f1": 1}


def test_from_collection_converts_tuples_lists_maps_and_nested_types() -> None:
    nested = Types.ROW_NAMED(
        ["id", "tags", "point"],
        [Types.LONG(), Types.LIST(Types.STRING()), Types.TUPLE([Types.DOUBLE(), Types.DOUBLE()])],
    )
    env = _env(1)
    out = env.from_collection([[7, ("a", "b"), [1, 2.5]]], nested).execute_and_collect(limit=1)
    row = out[0]
    assert row.id == 7 and row.tags == ["a", "b"] and row.point == (1.0, 2.5)
    assert type(row.point[0]) is float, "DOUBLE makes a float of an int, as Java does"
    pairs = _env(1).from_collection([["a", 1]], Types.TUPLE([Types.STRING(), Types.INT()]))
    assert pairs.execute_and_collect(limit=1) == [("a", 1)]


def test_pickled_and_untyped_collections_keep_python_objects() -> None:
    value = {"set": frozenset({1, 2})}
    for type_info in (None, Types.PICKLED_BYTE_ARRAY()):
        out = _env(1).from_collection([value], type_info).execute_and_collect(limit=1)
        assert out == [value]


@pytest.mark.parametrize(
    ("elements", "type_info", "message"),
    [
        ([1, "2"], Types.INT(), "element 1: '2' (str) is not of type Integer"),
        ([1 << 31], Types.INT(), "element 0: 2147483648 is outside Integer (32-bit signed)"),
        ([True], Types.LONG(), "element 0: True (bool) is not of type Long"),
        ([("a",)], Types.ROW([Types.STRING(), Types.INT()]), "has 1 fields, RowTypeInfo"),
        ([("a", "x")], Types.ROW([Types.STRING(), Types.INT()]), "element 0.f1: 'x' (str)"),
        ([{"word": "a"}], Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()]), "['n']"),
        ([("a", [1, "b"])], Types.TUPLE([Types.STRING(), Types.LIST(Types.INT())]), "[1][1]"),
    ],
)
def test_elements_that_do_not_fit_the_type_fail_when_the_job_is_defined(
    elements: list[Any], type_info: Any, message: str
) -> None:
    with pytest.raises(TypeError) as info:
        _env().from_collection(elements, type_info)
    assert message in str(info.value)


def test_row_follows_pyflink_names_sorted_equality_and_repr() -> None:
    person = Row(name="Alice", age=11)
    assert person.get_field_names() == ["age", "name"] and person[0] == 11
    assert repr(person) == "Row(age=11, name='Alice')" and repr(Row(1, "a")) == "<Row(1, 'a')>"
    factory = Row("name", "age")
    assert factory("Alice", 11).as_dict() == {"name": "Alice", "age": 11}
    assert Row(1, "a") == Row(1, "a") and Row(1, "a") != Row(1, "b")
    deleted = Row(1, "a")
    deleted.set_row_kind(RowKind.DELETE)
    assert deleted != Row(1, "a") and str(deleted.get_row_kind()) == "-D"


# ------------------------------------------------------------ sum / min / max / min_by / max_by


DATA = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]


@pytest.mark.parametrize(
    ("type_info", "field"),
    [
        (None, 1),
        (Types.TUPLE([Types.STRING(), Types.INT()]), 1),
        (Types.ROW([Types.STRING(), Types.INT()]), 1),
        (Types.ROW([Types.STRING(), Types.INT()]), "f1"),
        (Types.ROW_NAMED(["key", "value"], [Types.STRING(), Types.INT()]), "value"),
    ],
)
def test_sum_by_position_and_by_name_as_in_pyflinks_examples(type_info: Any, field: Any) -> None:
    ds = _env().from_collection(DATA, type_info)
    out = list(ds.key_by(lambda x: x[0]).sum(field).execute_and_collect())
    sums = {k: [r[1] for r in rs] for k, rs in _per_key(out).items()}
    assert sums == {"a": [1, 3, 6], "b": [1, 3]}
    expected_type = Row if isinstance(type_info, type(Types.ROW([]))) else tuple
    assert all(isinstance(r, expected_type) for r in out)


def test_min_and_max_keep_the_first_records_other_fields_min_by_takes_the_record() -> None:
    data = [
        ("a", 3, "x"),
        ("a", 1, "y"),
        ("a", 2, "z"),
        ("a", 1, "w"),
        ("b", 5, "p"),
        ("b", 5, "q"),
    ]
    named = Types.ROW_NAMED(["k", "v", "tag"], [Types.STRING(), Types.INT(), Types.STRING()])

    def run(aggregate: str, field: Any, typed: bool) -> dict[Any, list[tuple[Any, ...]]]:
        ds = _env().from_collection(data, named if typed else None).key_by(lambda r: r[0])
        out = list(getattr(ds, aggregate)(field).execute_and_collect())
        return {k: [tuple(r) for r in rs] for k, rs in _per_key(out).items()}

    for typed, field in ((False, 1), (True, "v")):
        assert run("min", field, typed)["a"] == [
            ("a", 3, "x"),
            ("a", 1, "x"),
            ("a", 1, "x"),
            ("a", 1, "x"),
        ]
        assert run("max", field, typed)["a"] == [("a", 3, "x")] * 4
        assert run("min_by", field, typed)["a"] == [
            ("a", 3, "x"),
            ("a", 1, "y"),
            ("a", 1, "y"),
            ("a", 1, "y"),
        ], "on ties min_by keeps the first record"
        assert run("max_by", field, typed)["b"] == [("b", 5, "p"), ("b", 5, "p")]


def test_scalar_records_are_one_field_and_other_positions_fail() -> None:
    ds = _env().from_collection([3, 1, 2]).key_by(lambda x: 0)
    assert list(ds.min(0).execute_and_collect()) == [3, 1, 1]
    with pytest.raises(TypeError, match="must be of int or str type"):
        _env().from_collection([1]).key_by(lambda x: x).sum(1.5)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ project


def test_project_keeps_tuple_fields_in_the_given_order_and_types_the_result() -> None:
    typed = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
    ds = _env().from_collection([("a", 1, 10), ("b", 2, 20)], typed)
    projected = ds.project(2, 0)
    assert projected.get_type() == Types.TUPLE([Types.LONG(), Types.STRING()])
    assert projected.get_name() == "Projection"
    assert sorted(projected.execute_and_collect()) == [(10, "a"), (20, "b")]
    keyed = _env().from_collection([("a", 1, 10)], typed).key_by(lambda r: r[0])
    assert list(keyed.project(1).execute_and_collect()) == [(1,)]


def test_project_refuses_untyped_streams_and_bad_indexes_when_defined() -> None:
    env = _env()
    with pytest.raises(TypeError, match="Only Tuple DataStreams can be projected"):
        env.from_collection([("a", 1)]).project(0)
    with pytest.raises(TypeError, match="Only Tuple DataStreams can be projected"):
        env.from_collection([("a", 1)], Types.ROW([Types.STRING(), Types.INT()])).project(0)
    typed = env.from_collection([("a", 1)], Types.TUPLE([Types.STRING(), Types.INT()]))
    with pytest.raises(IndexError, match="field index 2 is outside the tuple of 2 fields"):
        typed.project(0, 2)


# ---------------------------------------------------------------------- partition_custom


class Subtask(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value: Any) -> Any:
        return self.index, value


class ByFirstLetter(Partitioner):
    def partition(self, key: str, num_partitions: int) -> int:
        return "abc".index(key[0]) % num_partitions


def test_partition_custom_sends_each_record_where_the_partitioner_says() -> None:
    env = _env(3)
    words = ["apple", "banana", "cherry", "avocado", "blueberry", "cranberry"]
    routed = env.from_collection(words).partition_custom(ByFirstLetter(), lambda w: w)
    out = list(routed.map(Subtask()).execute_and_collect())
    assert sorted(out) == sorted(("abc".index(w[0]), w) for w in words)
    by_lambda = (
        _env(2)
        .from_collection(list(range(10)))
        .partition_custom(lambda key, n: key % n, lambda x: x)
    )
    assert sorted(by_lambda.map(Subtask()).execute_and_collect()) == [
        (x % 2, x) for x in sorted(range(10), key=lambda x: (x % 2, x))
    ]


def test_partition_custom_is_refused_on_keyed_streams_and_checks_its_arguments() -> None:
    env = _env()
    with pytest.raises(TypeError, match="Cannot override partitioning for KeyedStream"):
        env.from_collection([1]).key_by(lambda x: x).partition_custom(lambda k, n: 0, lambda x: x)
    with pytest.raises(TypeError, match="partitioner should be type of Partitioner"):
        env.from_collection([1]).partition_custom(3, lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key_selector should be type of KeySelector"):
        env.from_collection([1]).partition_custom(lambda k, n: 0, "x")  # type: ignore[arg-type]


def test_a_partition_outside_the_downstream_parallelism_fails_the_job_naming_it() -> None:
    from cairn.common.exceptions import JobExecutionException

    env = _env(2)
    bad = env.from_collection([1, 2]).partition_custom(lambda key, n: n, lambda x: x)
    with pytest.raises(JobExecutionException) as info:
        list(bad.map(lambda x: x).execute_and_collect())
    assert "partition_custom: the partitioner" in str(info.value)
    assert "returned 2 for key 1; it must return an int in [0, 2)" in str(info.value)


# --------------------------------------------------------------------------- set_uid_hash


def test_set_uid_hash_is_checked_then_refused_at_submission_by_name() -> None:
    env = _env()
    digest = "2e588ce1c86a9d46e2e85186773ce4fd"
    mapped = env.from_collection([1]).map(lambda x: x).name("double").set_uid_hash(digest)
    mapped.print().set_uid_hash(digest.upper())  # DataStreamSink has it too
    with pytest.raises(ValueError, match="32 character String that describes a hex code"):
        mapped.set_uid_hash("not-a-hash")
    with pytest.raises(TypeError, match="Set uid hash for KeyedStream is not supported"):
        mapped.key_by(lambda x: x).set_uid_hash(digest)
    with pytest.raises(JobSubmissionError, match=r"set_uid_hash\('2e58.*'double'.*uid"):
        env.execute("uid hash")


# --------------------------------------------------------------- execute_and_collect, print


def test_execute_and_collect_gives_an_iterator_or_with_limit_a_list() -> None:
    env = _env()
    first = env.from_collection(list(range(100))).map(lambda x: x)
    limited = first.execute_and_collect("limited", limit=5)
    assert isinstance(limited, list) and len(limited) == 5
    assert set(limited) <= set(range(100))
    with _env().from_collection([1, 2, 3]).execute_and_collect() as it:
        assert isinstance(it, CloseableIterator) and sorted(it) == [1, 2, 3]
    with pytest.raises(ValueError, match="Limit must be greater than 0"):
        _env().from_collection([1]).execute_and_collect(limit=0)


def test_print_writes_subtask_prefixes_only_above_parallelism_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = _env(1)
    env.from_collection([("a", 1), ("b", 2)]).print()
    env.execute("print 1")
    assert capsys.readouterr().out.splitlines() == ["('a', 1)", "('b', 2)"]

    env = _env(2)
    env.from_collection(list(range(6))).map(lambda x: x).print()
    env.execute("print 2")
    lines = capsys.readouterr().out.splitlines()
    prefixes = {line.split("> ")[0] for line in lines}
    assert prefixes <= {"1", "2"} and len(prefixes) == 2, lines
    assert sorted(int(line.split("> ")[1]) for line in lines) == list(range(6))


def test_print_formats_typed_values_as_pyflink(capsys: pytest.CaptureFixture[str]) -> None:
    env = _env(1)
    typed = Types.TUPLE([Types.STRING(), Types.BOOLEAN()])
    env.from_collection([("a", True)], typed).print("out")
    env.from_collection([("b", 2)], Types.ROW([Types.STRING(), Types.INT()])).print()
    env.execute("print typed")
    assert sorted(capsys.readouterr().out.splitlines()) == ["+I[b, 2]", "out> (a,true)"]


def test_cache_fails_when_defined_as_cairn_keeps_no_results_between_jobs() -> None:
    with pytest.raises(TypeError, match=r"cache\(\) is not supported: .* BATCH execution mode"):
        _env().from_collection([1]).cache()
