"""Two-input and broadcast operators without a task: the API's plans and errors, keyed
co-process timers, broadcast state read-only on the non-broadcast side, in checkpoints and
restored at another parallelism (every subtask the same copy), ``apply_to_keyed_state``."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connected_streams import BroadcastStream
from cairn.datastream.functions import (
    BroadcastProcessFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
from cairn.datastream.state import MapStateDescriptor, ValueStateDescriptor
from cairn.events import MAX_WATERMARK
from cairn.graph.job_graph import build_job_graph
from cairn.graph.transformations import (
    OperatorKind,
    PartitionKind,
)
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore
from cairn.testing.simple_state_files import MemoryStateFiles
from tests.unit._operator_harness import RULES, TwoInputHarness

BACKENDS = pytest.mark.parametrize("backend", ["heap", "rocksdb"])


class Tag(CoMapFunction):
    def map1(self, value: Any) -> Any:
        return ("one", value)

    def map2(self, value: Any) -> Any:
        return ("two", value)


class Join(KeyedCoProcessFunction):
    """Remembers the left value per key; a right value registers an event timer that emits
    the pair."""

    def open(self, ctx: Any) -> None:
        self.left = ctx.get_state(ValueStateDescriptor("left", None))

    def process_element1(self, value: Any, ctx: Any) -> Any:
        self.left.update(value[1])
        return None

    def process_element2(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield ("seen", ctx.get_current_key())

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("joined", ctx.get_current_key(), self.left.value(), timestamp, ctx.time_domain())


class Rules(KeyedBroadcastProcessFunction):
    """Multiplies each record by the rule of its key; a rule resets every key's count."""

    def open(self, ctx: Any) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("count", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        rule = ctx.get_broadcast_state(RULES).get(value[0])
        yield (value[0], value[1] * (rule or 1), self.count.value())

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        ctx.apply_to_keyed_state(
            ValueStateDescriptor("count", None), lambda key, state: state.update(0)
        )


class Writer(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put("x", value)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put("x", value)


# ------------------------------------------------------------------------------ the API


def test_connect_builds_one_operator_whose_edges_name_their_input() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    a = env.from_collection([("a", 1)]).map(lambda r: r, output_type=None)
    b = env.from_collection([("a", 2)])
    joined = a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).process(Join())
    joined.print()
    graph = build_job_graph("j", env._sinks, 2, 128)  # type: ignore[attr-defined]
    (co,) = [v for v in graph.vertices if v.operators[0].kind == "keyed_co_process"]
    ins = graph.inputs_of(co.id)
    assert [(e.input_side, e.partition) for e in ins] == [
        (0, PartitionKind.HASH),
        (1, PartitionKind.HASH),
    ]
    assert co.operators[0].keyed and len(co.operators) == 2, "the sink chains behind it"


def test_broadcast_with_descriptors_is_a_broadcast_stream_sent_to_every_subtask() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    rules = env.from_collection([("a", 2)]).broadcast(RULES)
    assert isinstance(rules, BroadcastStream)
    out = env.from_collection([("a", 1)]).key_by(lambda r: r[0]).connect(rules).process(Rules())
    out.print()
    graph = build_job_graph("j", env._sinks, 2, 128)  # type: ignore[attr-defined]
    (co,) = [v for v in graph.vertices if v.operators[0].kind == "keyed_broadcast_process"]
    sides = [(e.input_side, e.partition) for e in graph.inputs_of(co.id)]
    assert sides == [(0, PartitionKind.HASH), (1, PartitionKind.BROADCAST)]


def test_wrong_functions_and_descriptors_fail_when_the_job_is_defined() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    a, b = env.from_collection([1]), env.from_collection([2])
    with pytest.raises(TypeError, match="needs a CoMapFunction"):
        a.connect(b).map(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs key_by"):
        a.connect(b).process(Join())
    with pytest.raises(TypeError, match="KeyedCoProcessFunction is required"):
        a.connect(b).key_by(lambda x: x, lambda x: x).process(_Co())
    with pytest.raises(TypeError, match="MapStateDescriptors"):
        a.broadcast(ValueStateDescriptor("v", None))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="KeyedBroadcastProcessFunction is required"):
        a.key_by(lambda x: x).connect(b.broadcast(RULES)).process(Writer())
    with pytest.raises(TypeError, match="BroadcastProcessFunction is required"):
        a.connect(b.broadcast(RULES)).process(Rules())
    with pytest.raises(TypeError, match="connect\\(\\) takes"):
        a.connect([1, 2])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- operators


def test_co_map_calls_the_method_of_each_input_and_keeps_timestamps() -> None:
    h = TwoInputHarness(OperatorKind.CO_MAP, Tag(), keyed=False)
    h.side(1, stamp([5], [50]))
    h.side(0, [4])
    assert h.records() == [(("two", 5), 50), (("one", 4), None)]


@BACKENDS
def test_keyed_co_process_shares_state_across_inputs_and_fires_event_timers(backend: str) -> None:
    h = TwoInputHarness(OperatorKind.KEYED_CO_PROCESS, Join(), keyed=True, backend_kind=backend)
    h.side(0, stamp([("a", 1), ("b", 2)], [1, 2]))
    h.side(1, stamp([("b", "x"), ("a", "y")], [3, 4]))
    h.op.process_watermark(13)
    recs = [r for r, _ in h.records()]
    assert recs[:2] == [("seen", "b"), ("seen", "a")]
    assert [(r[1], r[2], r[3], r[4].name) for r in recs[2:]] == [("b", 2, 13, "EVENT_TIME")]
    h.op.process_watermark(MAX_WATERMARK)
    assert h.records()[-1] == (("joined", "a", 1, 14, h.records()[-1][0][4]), 14)


def test_non_keyed_co_process_has_no_timers() -> None:
    class Timers(CoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(1)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            return None

    h = TwoInputHarness(OperatorKind.CO_PROCESS, Timers(), keyed=False)
    with pytest.raises(RuntimeError, match="keyed ConnectedStreams"):
        h.side(0, [1])


def test_broadcast_state_is_read_only_on_the_non_broadcast_side() -> None:
    h = TwoInputHarness(OperatorKind.BROADCAST_PROCESS, Writer(), keyed=False)
    h.side(1, [3])
    with pytest.raises(RuntimeError, match="read-only"):
        h.side(0, [4])


def test_undeclared_broadcast_state_is_named_in_the_error() -> None:
    class Other(BroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            return None

        def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
            ctx.get_broadcast_state(MapStateDescriptor("other", None, None))

    h = TwoInputHarness(OperatorKind.BROADCAST_PROCESS, Other(), keyed=False)
    with pytest.raises(ValueError, match="'other' was not given to broadcast"):
        h.side(1, [1])


@BACKENDS
def test_apply_to_keyed_state_visits_every_key_of_the_subtask(backend: str) -> None:
    h = TwoInputHarness(
        OperatorKind.KEYED_BROADCAST_PROCESS, Rules(), keyed=True, backend_kind=backend
    )
    h.side(0, [("a", 1), ("b", 1), ("a", 1)])
    h.side(1, [("a", 10)])
    h.side(0, [("a", 2), ("b", 3)])
    assert [r for r, _ in h.records()][-2:] == [("a", 20, 1), ("b", 3, 1)]


class Lookup(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.get_broadcast_state(RULES).get(value))

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


@pytest.mark.parametrize("new_parallelism", [1, 2, 3, 5])
def test_broadcast_state_is_restored_on_every_subtask_at_any_parallelism(
    new_parallelism: int,
) -> None:
    old = {}
    files = MemoryStateFiles(1)
    for index in range(2):
        h = TwoInputHarness(OperatorKind.BROADCAST_PROCESS, Lookup(), False, 2, index)
        h.side(1, [("a", 10), ("b", 7)])
        old[index] = h.snapshot(files)
    for index in range(new_parallelism):
        restore = OperatorRestore(2, old, files)
        r = TwoInputHarness(
            OperatorKind.BROADCAST_PROCESS, Lookup(), False, new_parallelism, index, restore
        )
        r.side(0, ["a", "b", "c"])
        assert [x for x, _ in r.records()] == [("a", 10), ("b", 7), ("c", None)]


class _Co(CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        return None

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return None


def test_keyed_co_process_processing_time_timers_fire_with_their_key_and_domain() -> None:
    class Remind(KeyedCoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(100)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(200)

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield (ctx.get_current_key(), timestamp, ctx.time_domain().name, ctx.timestamp())

    h = TwoInputHarness(OperatorKind.KEYED_CO_PROCESS, Remind(), keyed=True)
    h.side(0, [("a", 1)])
    h.side(1, [("b", 2)])
    h.op.on_processing_time(150)
    h.op.on_processing_time(250)
    assert h.records() == [
        (("a", 100, "PROCESSING_TIME", 100), None),
        (("b", 200, "PROCESSING_TIME", 200), None),
    ]


def test_the_broadcast_side_of_a_keyed_operator_has_no_key_and_no_timers() -> None:
    class Stale(KeyedBroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            return None

        def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(1)

    h = TwoInputHarness(OperatorKind.KEYED_BROADCAST_PROCESS, Stale(), keyed=True)
    h.side(0, [("a", 1)])
    with pytest.raises(RuntimeError, match="no current key, so no timer_service"):
        h.side(1, [("rule", 1)])


def test_a_co_process_function_emits_side_outputs_with_their_timestamps() -> None:
    from cairn.datastream import OutputTag

    odd = OutputTag("odd")

    class Split(CoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield (odd, value) if value % 2 else value

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield odd, -value

    h = TwoInputHarness(OperatorKind.CO_PROCESS, Split(), keyed=False)
    side: list[Any] = []
    h.op.side_outputs = {odd.tag_id: side.append}
    h.side(0, stamp([1, 2], [10, 20]))
    h.side(1, [3])
    assert h.records() == [(2, 20)]
    assert [(list(b), getattr(b, "timestamps", None)) for b in side] == [([1], [10]), ([-3], None)]


def test_connecting_a_stream_with_itself_gives_one_edge_per_input() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    a = env.from_collection([1]).map(lambda x: x)
    a.connect(a).map(Tag()).print()
    graph = build_job_graph("j", env._sinks, 2, 128)  # type: ignore[attr-defined]
    (co,) = [v for v in graph.vertices if v.operators[0].kind == "co_map"]
    assert [e.input_side for e in graph.inputs_of(co.id)] == [0, 1]
