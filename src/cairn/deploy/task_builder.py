"""Building a worker's subtasks at start-up: operators, keyed state backends, restored state,
record writers over local or remote channels.

Invariants: every subtask gets its own copy of the user's function objects (as in Flink),
even when several subtasks of one operator share the worker; a task's operators are all set
up, then all restore their state, then the in-flight data an unaligned checkpoint persisted
is replayed into its input channels, and only then do they open (the chain's tail first);
each task and keyed backend is in the caller's lists as soon as it exists, so a failure
half-way still closes and disposes what was built.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

from cairn.checkpoint.handles import StateFileReader
from cairn.checkpoint.local_recovery import LocalRecoveryStore
from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.metadata import decode_metadata
from cairn.checkpoint.read_timing import ReadTiming
from cairn.checkpoint.storage import CheckpointStorage
from cairn.deploy import control_messages as p
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.job_pickling import dumps
from cairn.events import AlignmentMode
from cairn.graph.job_graph import JobGraph
from cairn.graph.transformations import PartitionKind
from cairn.runtime.channel_state import channel_state_for_subtask, read_channel_state
from cairn.runtime.channels import (
    DEFAULT_CAPACITY,
    ConnectionSender,
    InputChannel,
    LocalOutputChannel,
    OutputChannel,
    RemoteOutputChannel,
)
from cairn.runtime.debloat import DebloatConfig
from cairn.runtime.edge_errors import EdgeLabel
from cairn.runtime.input_gate import InputGate
from cairn.runtime.keyed_batch import as_plain
from cairn.runtime.latency import Granularity, LatencyConfig
from cairn.runtime.operators import create_operator, takes_key_groups
from cairn.runtime.operators.base import OperatorContext, OperatorRestore
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.task import StreamTask, TaskServices
from cairn.settings import JobSettings, MetricsSettings, NetworkSettings
from cairn.state.api import KeyedStateBackend
from cairn.state.factory import create_keyed_backend
from cairn.state.heap_backend import OperatorStateBackend
from cairn.state.key_groups import key_group_range_for_subtask

__all__ = ["TaskBuilder", "debloat_config", "latency_config", "read_restores"]

log = logging.getLogger(__name__)


def read_restores(
    storage: CheckpointStorage,
    info: p.RestoreInfo | None,
    timing: ReadTiming | None = None,
    local: LocalRecoveryStore | None = None,
) -> dict[str, OperatorRestore]:
    """The restored state of each operator uid of the checkpoint in ``info`` (none: ``{}``);
    ``timing`` counts the state reads; ``local``: read the local copies first."""
    if info is None:
        return {}
    # Checked here, not trusted from the master: with a signing key the signature (of the
    # shipped bytes, or of the file) and every state file's digest are checked before
    # anything is unpickled.
    if info.metadata is not None:
        metadata = decode_metadata(info.metadata, info.checkpoint_dir, storage.signing_key)
    else:
        metadata = storage.read_metadata(info.checkpoint_dir)
    reader: StateFileReader = storage.reader(info.checkpoint_dir)
    if local is not None:
        reader = local.reader(reader, metadata.checkpoint_id)
    if timing is not None:
        reader = timing.wrap(reader)
    restores: dict[str, OperatorRestore] = {}
    for uid, op in metadata.operators.items():
        restores[uid] = OperatorRestore(op.parallelism, dict(op.subtasks), reader)
    return restores


def latency_config(metrics: MetricsSettings) -> LatencyConfig | None:
    """Latency tracking as the job's metrics settings configure it (``None``: off).

    >>> latency_config(MetricsSettings()) is None
    True
    >>> latency_config(MetricsSettings(latency_interval_ms=1000)).granularity
    <Granularity.OPERATOR: 'operator'>
    """
    if metrics.latency_interval_ms <= 0:
        return None
    return LatencyConfig(
        metrics.latency_interval_ms,
        Granularity(metrics.latency_granularity),
        metrics.latency_history_size,
    )


def debloat_config(net: NetworkSettings) -> DebloatConfig | None:
    """Buffer debloating as the job's network settings configure it (``None``: off)."""
    if not net.debloat_enabled:
        return None
    return DebloatConfig(
        target_ms=net.debloat_target_ms,
        period_ms=net.debloat_period_ms,
        samples=net.debloat_samples,
        threshold_percent=net.debloat_threshold_percent,
        min_size=net.min_batch_size,
        max_size=net.batch_size,
    )


class TaskBuilder:
    """Builds the tasks the plan puts on worker ``worker_index``.

    ``inputs``: the worker's input channels by id; ``senders``: its connections to the peers
    it sends to, by peer (started by the caller once every task is built); ``services``: the
    worker, as the tasks and operators see it.
    """

    def __init__(
        self,
        services: TaskServices,
        worker_index: int,
        settings: JobSettings,
        graph: JobGraph,
        plan: ExecutionPlan,
        inputs: dict[int, InputChannel],
        senders: dict[int, ConnectionSender],
    ) -> None:
        self._services = services
        self._index = worker_index
        self._settings = settings
        self._graph = graph
        self._plan = plan
        self._inputs = inputs
        self._senders = senders

    def build(
        self,
        restores: dict[str, OperatorRestore],
        tasks: list[StreamTask],
        keyed_backends: list[KeyedStateBackend],
    ) -> None:
        """Append the worker's tasks to ``tasks`` and their keyed backends to
        ``keyed_backends``, restored from ``restores`` (by operator uid)."""
        settings, services = self._settings, self._services
        alignment = settings.checkpoint.mode
        if settings.checkpoint.unaligned and alignment is AlignmentMode.ALIGNED:
            alignment = AlignmentMode.UNALIGNED  # barriers' options decide per checkpoint
        checkpointing = settings.checkpoint.enabled
        job_parameters = dict(settings.job_parameters)
        debloat = debloat_config(settings.network)
        latency = latency_config(settings.metrics)
        chains: dict[int, bytes] = {}
        for key in self._plan.tasks_of(self._index):
            vertex = self._graph.vertex(key.vertex_id)
            writers = self._record_writers(key)
            # Every subtask gets its own copy of the user's function objects (as in Flink),
            # even when several subtasks of one operator share this worker.
            if vertex.id not in chains:
                chains[vertex.id] = dumps(vertex.operators)
            nodes = cloudpickle.loads(chains[vertex.id])
            ops = [create_operator(node) for node in nodes]
            specs = self._plan.input_channels(key)
            gate = InputGate([self._inputs[s.channel_id] for s in specs]) if specs else None
            sides = [s.edge.input_side for s in specs]  # a two-input head's logical inputs
            args = (key, vertex, ops, gate, writers, services, alignment, checkpointing, debloat)
            task = StreamTask(*args, sides=sides, latency=latency)
            task.flush_when_drained = settings.buffer_timeout_ms >= 0
            task.polling.linger_s = settings.buffer_linger_ms / 1000.0
            fan_out = _fan_out(writers)
            for i, (node, op) in enumerate(zip(nodes, ops, strict=True)):
                output = ops[i + 1].process_batch if i + 1 < len(ops) else fan_out
                keyed = None
                if node.keyed:
                    kg_range = key_group_range_for_subtask(
                        node.max_parallelism, node.parallelism, key.subtask_index
                    )
                    keyed = create_keyed_backend(
                        settings.state,
                        kg_range,
                        node.max_parallelism,
                        job_id=services.job_id,
                        attempt=services.attempt,
                        name=f"{node.uid}-{key.subtask_index}-",
                    )
                    keyed_backends.append(keyed)
                op.setup(
                    OperatorContext(
                        node=node,
                        task_name=vertex.name,
                        subtask_index=key.subtask_index,
                        parallelism=vertex.parallelism,
                        max_parallelism=node.max_parallelism,
                        attempt=services.attempt,
                        job_id=services.job_id,
                        output=output,
                        operator_backend=OperatorStateBackend(),
                        keyed_backend=keyed,
                        clock_ms=now_ms,
                        services=services,
                        checkpointing=checkpointing,
                        job_parameters=job_parameters,
                        watermark_interval_ms=settings.auto_watermark_interval_ms,
                        user_metrics=task.user_metrics,
                    )
                )
            for op in ops:
                op.initialize_state(restores.get(op.uid))
            if gate is not None:
                _replay_in_flight_data(task, gate, restores.get(ops[0].uid))
            for op in reversed(ops):
                op.open()
                if hasattr(op, "wake"):
                    op.wake = services.wake
            tasks.append(task)

    def _record_writers(self, key: TaskKey) -> list[RecordWriter]:
        graph, plan, network = self._graph, self._plan, self._settings.network
        writers = []
        producer = graph.vertex(key.vertex_id).operators[-1]
        for edge in graph.outputs_of(key.vertex_id):
            label = EdgeLabel(
                producer.name,
                producer.uid,
                graph.vertex(edge.target_vertex).name,
                edge.partition,
            )
            channels: list[OutputChannel] = []
            for spec in plan.output_channels(key, edge):
                target_worker = plan.worker_of(spec.target)
                if target_worker == self._index:
                    channels.append(LocalOutputChannel(self._inputs[spec.channel_id]))
                else:
                    sender = self._senders[target_worker]
                    ch = RemoteOutputChannel(
                        spec.channel_id,
                        sender,
                        DEFAULT_CAPACITY,
                        edge=label,
                        max_frame_size=network.max_frame_size,
                    )
                    sender.register(ch)
                    channels.append(ch)
            head = graph.vertex(edge.target_vertex).operators[0]
            writers.append(
                RecordWriter.for_edge(
                    channels,
                    edge,
                    subtask_index=key.subtask_index,
                    batch_size=network.batch_size,
                    carry_key_groups=edge.partition is PartitionKind.HASH
                    and takes_key_groups(head),
                )
            )
        return writers


def _replay_in_flight_data(
    task: StreamTask, gate: InputGate, restore: OperatorRestore | None
) -> None:
    """Put the in-flight data an unaligned checkpoint persisted back into the channels."""
    if restore is None:
        return
    handle = channel_state_for_subtask(
        {i: st.input_channels for i, st in restore.subtasks.items()},
        restore.old_parallelism,
        task.vertex.parallelism,
        task.key.subtask_index,
        len(gate.channels),
        task.name,
    )
    if handle is None:
        return
    batches = read_channel_state(restore.reader, handle)
    if not takes_key_groups(task.head.node):  # persisted for another version of the job's head
        batches = {channel: [as_plain(b) for b in bs] for channel, bs in batches.items()}
    for channel, channel_batches in batches.items():
        gate.replay(channel, channel_batches)
    log.info(
        "%s: replaying %d in-flight batches (%d bytes) of the restored checkpoint",
        task.name,
        sum(map(len, batches.values())),
        handle.size,
    )


def _fan_out(writers: list[RecordWriter]) -> Callable[[list[Any]], None]:
    if not writers:
        return lambda records: None
    if len(writers) == 1:
        return writers[0].emit

    def emit_all(records: list[Any]) -> None:
        for w in writers:
            w.emit(records)

    return emit_all


def now_ms() -> int:
    """Wall-clock milliseconds: the operators' processing-time clock and the task loop's."""
    return int(time.time() * 1000)
