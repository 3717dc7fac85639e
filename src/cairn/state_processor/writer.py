"""Writing savepoints from Spark DataFrames: bootstrap new state, or modify an existing one.

Invariant: a savepoint written here is complete iff its ``_metadata`` exists, and that is
written last, on the driver, after every Spark task wrote its state file (one per key-group
range of an operator) and every kept file was copied; keys are placed in key groups exactly
as the engine places them (``state.key_groups``), sections are in the heap backend's
canonical format, and with a signing key every file carries its SHA-256 and the metadata is
signed. Operators (and states of a rewritten operator) that are not replaced are kept as
they were.

>>> from cairn.api.state import ValueStateDescriptor
>>> # (SavepointWriter.new_savepoint(spark, max_parallelism=128)
>>> #  .with_keyed_state("keyed-sum", ValueStateDescriptor("sum", Types.LONG()), totals)
>>> #  .write("file:///savepoints/backfill"))
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from cairn.api.state import MapStateDescriptor, StateDescriptor
from cairn.checkpoint.handles import KeyedStateHandle, KeyedStateSchema, OperatorSubtaskState
from cairn.checkpoint.metadata import (
    CheckpointMetadata,
    CheckpointSummaryStats,
    CompletedCheckpoint,
    OperatorMetadata,
)
from cairn.checkpoint.storage import load_checkpoint, open_reader, open_writer, publish_metadata
from cairn.ids import CheckpointId, JobId, OperatorUid, SubtaskIndex
from cairn.settings import DEFAULT_MAX_PARALLELISM, SigningKey
from cairn.state.key_groups import check_parallelism
from cairn.state.schema import schema_of
from cairn.state_processor.columns import Column, column_accepts, from_spark, spark_column
from cairn.state_processor.errors import StateProcessorError, ValueTypeError
from cairn.state_processor.key_group_slices import (
    KeyedSlice,
    default_parallelism,
    heap_format_handles,
    plan_keyed_slices,
    route,
)
from cairn.state_processor.reader import KEYED_KINDS, CheckpointSource, signing_key_of
from cairn.state_processor.sections import SliceTables, StateSpec, encode_slice, read_slice

__all__ = ["SavepointWriter"]

log = logging.getLogger(__name__)

_NAME_SUFFIX = re.compile(r"-[0-9a-f]{32}(-sha256-[0-9a-f]{64})?$")


@dataclass(frozen=True)
class _Input:
    """One state to write: its descriptor and the DataFrame's columns that feed it."""

    spec: StateSpec
    data: DataFrame
    columns: tuple[str, ...]  # key[, user_key], value
    key: Column
    user_key: Column | None
    value: Column
    schema: KeyedStateSchema  # recorded in the metadata (``cairn.state.schema``)


@dataclass
class _Operator:
    """What will be written for one uid."""

    uid: str
    parallelism: int | None
    inputs: list[_Input] = field(default_factory=list)


@dataclass(frozen=True)
class _Router:
    """Spark row -> (slice index, (state, key group, key, user key, value))."""

    state: int
    max_parallelism: int
    parallelism: int
    key: Column
    user_key: Column | None
    value: Column
    uid: str
    name: str
    wrap: bool  # list state fed one element per row: the element becomes a one-element list

    def __call__(self, row: Any) -> tuple[int, tuple[Any, ...]]:
        try:
            key = _hashable(from_spark(row[0], self.key))
            user_key = (
                None if self.user_key is None else _hashable(from_spark(row[1], self.user_key))
            )
            value = from_spark(row[-1], self.value)
            if self.wrap and value is not None:
                value = [value]
            kg, index = route(key, self.max_parallelism, self.parallelism)
        except Exception as exc:  # an unsupported key type, a pickle that does not load
            raise StateProcessorError(
                f"operator uid {self.uid!r}, state {self.name!r}, row {_short(row)}: {exc}"
            ) from exc
        return index, (self.state, kg, key, user_key, value)


def _short(row: Any) -> str:
    shown = repr(tuple(row))
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _hashable(key: Any) -> Any:
    """Array keys arrive as lists: key groups hash tuples (as a job's tuple keys)."""
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def _identity(index: int) -> int:
    return index


@dataclass(frozen=True)
class _WriteTask:
    """Writes one slice's keyed state file (merged with the base savepoint's sections)."""

    uid: str
    target: str
    storage_options: Mapping[str, Any]
    digests: bool
    specs: tuple[StateSpec, ...]
    replaced: frozenset[str]
    slices: tuple[KeyedSlice, ...]  # the base savepoint's sections of each new slice
    base: CheckpointSource | None

    def __call__(
        self, index: int, rows: Iterable[tuple[int, tuple[Any, ...]]]
    ) -> Iterator[tuple[int, KeyedStateHandle]]:
        tables = SliceTables(self.specs, self.uid)
        for _index, (state, kg, key, user_key, value) in rows:
            tables.add(state, kg, key, user_key, value)
        piece = self.slices[index]
        old = {}
        if self.base is not None and piece.files:
            old = dict(read_slice(piece, self.base.reader(), self.uid))
        data, ranges = encode_slice(tables, old, self.replaced)
        if not ranges:
            return
        kgs = piece.key_groups
        writer = open_writer(self.target, self.storage_options, self.digests)
        path = writer.write_state_file(f"keyed-kg{kgs.start}-{kgs.end}.state", data)
        yield index, KeyedStateHandle(path, kgs.start, kgs.end, ranges, len(data))


@dataclass(frozen=True)
class _CopyTask:
    """Copies one kept state file from the base savepoint (re-named with a digest if the new
    savepoint is signed; checked against its digest if the base was read with a key)."""

    base: CheckpointSource
    target: str
    storage_options: Mapping[str, Any]
    digests: bool

    def __call__(self, rel: str) -> tuple[str, str]:
        data = self.base.reader().read_state_file(rel)
        name = _NAME_SUFFIX.sub("", rel) or "state"
        return rel, open_writer(self.target, self.storage_options, self.digests).write_state_file(
            name, data
        )


class SavepointWriter:
    """Builds a savepoint from DataFrames (Flink's ``SavepointWriter`` for Python and Spark).

    ``new_savepoint`` starts empty; ``from_existing_savepoint`` starts from a savepoint or
    retained checkpoint and keeps everything not replaced or removed. ``with_keyed_state``
    adds (or replaces) one keyed state of an operator uid; ``write`` runs the Spark jobs.
    """

    def __init__(
        self,
        spark: SparkSession,
        max_parallelism: int,
        base: CompletedCheckpoint | None = None,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | None = None,
    ) -> None:
        check_parallelism(max_parallelism, 1)
        self.spark = spark
        self.max_parallelism = max_parallelism
        self.base = base
        self.storage_options = dict(storage_options or {})
        self.signing_key = signing_key
        self._operators: dict[str, _Operator] = {}
        self._removed: set[str] = set()

    @classmethod
    def new_savepoint(
        cls,
        spark: SparkSession,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        *,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | str | None = None,
    ) -> SavepointWriter:
        """An empty savepoint for jobs with ``max_parallelism`` key groups (the job must use
        the same: ``env.set_max_parallelism``, default 128)."""
        return cls(spark, max_parallelism, None, storage_options, signing_key_of(signing_key))

    @classmethod
    def from_existing_savepoint(
        cls,
        spark: SparkSession,
        path: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | str | None = None,
    ) -> SavepointWriter:
        """A savepoint that starts as a copy of the one at ``path`` (read, and the new one
        written, with ``signing_key`` if given)."""
        key = signing_key_of(signing_key)
        base = load_checkpoint(path, storage_options, key)
        return cls(spark, base.metadata.max_parallelism, base, storage_options, key)

    def _base_operator(self, uid: str) -> OperatorMetadata | None:
        if self.base is None:
            return None
        return self.base.metadata.operators.get(OperatorUid(uid))

    def _base_source(self) -> CheckpointSource:
        assert self.base is not None
        return CheckpointSource(
            self.base.directory, self.storage_options, self.signing_key is not None
        )

    def remove_operator(self, uid: str) -> SavepointWriter:
        """Leave the state of operator ``uid`` out of the new savepoint."""
        self._removed.add(uid)
        self._operators.pop(uid, None)
        return self

    def with_keyed_state(
        self,
        uid: str,
        descriptor: StateDescriptor,
        data: DataFrame,
        *,
        key_type: Any = None,
        parallelism: int | None = None,
    ) -> SavepointWriter:
        """Write keyed state ``descriptor.name`` of operator ``uid`` from ``data``.

        ``data`` has columns ``key, value`` (map state: ``key, user_key, value``), by these
        names or, if it has no such columns, by position. A value-like state takes one row
        per key (a ``null`` value writes nothing); list state appends each row's value to
        its key's list (an array column gives whole lists; in which order rows of one key
        arrive is Spark's, so use arrays where order matters); map state one row per user
        key. Column types must fit the descriptor's type info; where it has no Spark type,
        the column holds pickles (as ``SavepointReader`` gives them; list state of such
        elements one element per row). ``key_type`` set to
        ``Types.PICKLED_BYTE_ARRAY()`` reads pickled keys. Other states of ``uid`` in the
        base savepoint are kept; ``parallelism`` (new operators only) is the number of
        tasks and files (default: Spark's default parallelism).

        Raises:
            StateProcessorError: not a keyed descriptor, missing columns, a column type that
                does not fit the descriptor, a parallelism out of range.
        """
        if not isinstance(descriptor, StateDescriptor) or descriptor.kind not in KEYED_KINDS:
            raise StateProcessorError(f"not a keyed state descriptor: {descriptor!r}")
        if uid in self._removed:
            raise StateProcessorError(f"operator uid {uid!r} was removed from this savepoint")
        base = self._base_operator(uid)
        if parallelism is not None:
            check_parallelism(self.max_parallelism, parallelism)
            if base is not None and parallelism != base.parallelism:
                raise StateProcessorError(
                    f"operator uid {uid!r} is kept at parallelism {base.parallelism} (its "
                    f"operator state is split by it); got parallelism={parallelism}"
                )
        op = self._operators.setdefault(uid, _Operator(uid, parallelism))
        if parallelism is not None:
            op.parallelism = parallelism
        if any(i.spec.name == descriptor.name for i in op.inputs):
            raise StateProcessorError(
                f"operator uid {uid!r}: state {descriptor.name!r} is given twice"
            )
        op.inputs.append(_input(uid, descriptor, data, key_type))
        return self

    # -------------------------------------------------------------------------- writing

    def write(self, path: str) -> CompletedCheckpoint:
        """Run the Spark jobs that write the state files into ``path``, then ``_metadata``.

        A write that fails leaves state files but no ``_metadata`` in ``path``: that is not a
        savepoint (nothing restores it); delete the directory and write again.

        Raises:
            FileExistsError: ``path`` already holds a savepoint or checkpoint.
            StateProcessorError: bad rows (duplicate keys, values that do not fit) or an
                unreadable base savepoint; the Spark job's error names uid, state and key.
        """
        target = open_reader(path, self.storage_options).directory  # the resolved name
        if self.base is not None and _place(self.base.directory, self.storage_options) == (
            _place(target, self.storage_options)
        ):
            raise StateProcessorError(f"{path}: cannot write a savepoint over its own base")
        _refuse_existing(target, self.storage_options)
        start_ms = int(time.time() * 1000)
        operators, renamed = self._copy_kept(target, set(self._operators))
        for uid, op in self._operators.items():
            operators[OperatorUid(uid)] = self._write_operator(op, target, renamed)
        metadata = self._metadata(operators, start_ms)
        done = publish_metadata(metadata, target, self.storage_options, self.signing_key)
        log.info("wrote savepoint %s (%d operators)", done.directory, len(operators))
        return done

    def _metadata(
        self, operators: Mapping[OperatorUid, OperatorMetadata], start_ms: int
    ) -> CheckpointMetadata:
        now = int(time.time() * 1000)
        size = sum(op.state_size for op in operators.values())
        stats = CheckpointSummaryStats(state_size=size)
        if self.base is not None:
            return replace(
                self.base.metadata,
                operators=operators,
                is_savepoint=True,
                trigger_ms=start_ms,
                completed_ms=now,
                stats=stats,
            )
        return CheckpointMetadata(
            job_id=JobId("state-processor"),
            checkpoint_id=CheckpointId(1),
            trigger_ms=start_ms,
            completed_ms=now,
            max_parallelism=self.max_parallelism,
            operators=operators,
            is_savepoint=True,
            stats=stats,
            properties={"written-by": "cairn.state_processor"},
        )

    def _write_operator(
        self, op: _Operator, target: str, renamed: Mapping[str, str]
    ) -> OperatorMetadata:
        base = self._base_operator(op.uid)
        maxp = self.max_parallelism
        if base is not None:
            parallelism = base.parallelism
            maxp = base.max_parallelism
        else:
            parallelism = op.parallelism or default_parallelism(
                maxp, self.spark.sparkContext.defaultParallelism
            )
        old_handles = (
            []
            if base is None
            else heap_format_handles([h for s in base.subtasks.values() for h in s.keyed], op.uid)
        )
        slices = tuple(plan_keyed_slices(old_handles, maxp, parallelism, op.uid))
        source = None
        if self.base is not None and old_handles:
            source = self._base_source()
        rdds = [
            i.data.select(*i.columns).rdd.map(
                _Router(
                    n,
                    maxp,
                    parallelism,
                    i.key,
                    i.user_key,
                    i.value,
                    op.uid,
                    i.spec.name,
                    wrap=i.spec.kind == "list" and not isinstance(i.value.data_type, T.ArrayType),
                )
            )
            for n, i in enumerate(op.inputs)
        ]
        rows = self.spark.sparkContext.union(rdds) if len(rdds) > 1 else rdds[0]
        task = _WriteTask(
            uid=op.uid,
            target=target,
            storage_options=self.storage_options,
            digests=self.signing_key is not None,
            specs=tuple(i.spec for i in op.inputs),
            replaced=frozenset(i.spec.name for i in op.inputs),
            slices=slices,
            base=source,
        )
        log.info("writing state of %r: %d tasks, max parallelism %d", op.uid, parallelism, maxp)
        written = rows.partitionBy(parallelism, _identity).mapPartitionsWithIndex(task).collect()
        keyed = dict(written)
        subtasks: dict[SubtaskIndex, OperatorSubtaskState] = {}
        written_schema = {i.spec.name: i.schema for i in op.inputs}
        old_subtasks = {} if base is None else dict(base.subtasks)
        for index in map(SubtaskIndex, range(parallelism)):
            old = _renamed(old_subtasks.get(index, OperatorSubtaskState()), renamed)
            handle = keyed.get(index)
            schema = {n: sc for n, sc in old.keyed_schema.items() if n not in written_schema}
            state = replace(
                old,
                keyed=(handle,) if handle is not None else (),
                keyed_schema={**schema, **written_schema} if handle is not None else {},
            )
            if not state.is_empty:
                subtasks[index] = state
        return OperatorMetadata(OperatorUid(op.uid), parallelism, maxp, subtasks)

    def _copy_kept(
        self, target: str, rewritten: set[str]
    ) -> tuple[dict[OperatorUid, OperatorMetadata], dict[str, str]]:
        """Copy the files of every kept operator (and the non-keyed files of rewritten ones,
        whose keyed files are rewritten) in Spark tasks: the kept operators with their new
        paths, and old path -> new path."""
        if self.base is None:
            return {}, {}
        kept = {
            uid: op for uid, op in self.base.metadata.operators.items() if uid not in self._removed
        }
        rels: set[str] = set()
        for uid, op in kept.items():
            for sub in op.subtasks.values():
                if uid not in rewritten:
                    rels.update(h.path for h in sub.keyed)
                rels.update(h.path for h in sub.operator)
                if sub.input_channels is not None:
                    rels.add(sub.input_channels.path)
        renamed: dict[str, str] = {}
        if rels:
            source = self._base_source()
            task = _CopyTask(source, target, self.storage_options, self.signing_key is not None)
            ordered = sorted(rels)
            renamed = dict(
                self.spark.sparkContext.parallelize(ordered, len(ordered)).map(task).collect()
            )
        out: dict[OperatorUid, OperatorMetadata] = {}
        for uid, op in kept.items():
            if uid in rewritten:
                continue
            out[uid] = replace(
                op, subtasks={i: _renamed(sub, renamed) for i, sub in op.subtasks.items()}
            )
        return out, renamed


def _renamed(sub: OperatorSubtaskState, renamed: Mapping[str, str]) -> OperatorSubtaskState:
    channels = sub.input_channels
    return replace(
        sub,
        keyed=tuple(
            replace(h, path=renamed.get(h.path, h.path))
            for h in heap_format_handles(sub.keyed, "(kept operator)")
        ),
        operator=tuple(replace(h, path=renamed.get(h.path, h.path)) for h in sub.operator),
        input_channels=None
        if channels is None
        else replace(channels, path=renamed.get(channels.path, channels.path)),
    )


def _place(path: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    """Filesystem protocol and path of ``path``, however it is spelled (URL or plain)."""
    from cairn.common.storage_options import url_to_fresh_fs

    fs, p = url_to_fresh_fs(path, storage_options)
    return fs.protocol, p.rstrip("/")


def _refuse_existing(target: str, storage_options: Mapping[str, Any]) -> None:
    from cairn.common.storage_options import url_to_fresh_fs

    fs, p = url_to_fresh_fs(target, storage_options)
    if fs.exists(p.rstrip("/") + "/_metadata"):
        raise FileExistsError(f"{target}: already contains a savepoint or checkpoint (_metadata)")


def _input(uid: str, descriptor: StateDescriptor, data: DataFrame, key_type: Any) -> _Input:
    kind = descriptor.kind
    is_map = isinstance(descriptor, MapStateDescriptor)
    wanted: tuple[str, ...] = ("key", "user_key", "value") if is_map else ("key", "value")
    names = list(data.columns)
    if all(n in names for n in wanted):
        columns = wanted
    elif len(names) == len(wanted):
        columns = tuple(names)
    else:
        raise StateProcessorError(
            f"operator uid {uid!r}, state {descriptor.name!r}: the DataFrame needs columns "
            f"{', '.join(wanted)} (by name, or exactly {len(wanted)} columns), it has "
            f"{', '.join(names)}"
        )
    fields = {f.name: f.dataType for f in data.schema.fields}
    types = [fields[c] for c in columns]

    def fit(info: Any, actual: T.DataType, column: str, element_ok: bool = False) -> Column:
        expected = spark_column(info)
        if element_ok and isinstance(actual, T.ArrayType) and not expected.pickled:
            actual = actual.elementType  # a list state row holding a whole list
        if expected.pickled:
            if not isinstance(actual, T.BinaryType):
                raise ValueTypeError(
                    f"operator uid {uid!r}, state {descriptor.name!r}: type info {info!r} has "
                    f"no Spark type, so column {column!r} must hold pickled values (binary, "
                    f"as SavepointReader gives them), but it is {actual.simpleString()}; "
                    "give the writer's descriptor a type info such as Types.LONG() (type "
                    "infos are hints: the job's descriptor may stay untyped)"
                )
            return expected
        if not column_accepts(expected.data_type, actual):
            raise ValueTypeError(
                f"operator uid {uid!r}, state {descriptor.name!r}: column {column!r} is "
                f"{actual.simpleString()}, but the descriptor's type info {info!r} is "
                f"{expected.data_type.simpleString()}"
            )
        return Column(actual, False, info)

    key = (
        Column(types[0], pickled=spark_column(key_type).pickled)
        if key_type is not None
        else Column(types[0])
    )
    if is_map:
        assert isinstance(descriptor, MapStateDescriptor)
        user_key = fit(descriptor.key_type_info, types[1], columns[1])
        value = fit(descriptor.value_type_info, types[2], columns[2])
    else:
        user_key = None
        value = fit(descriptor.type_info, types[1], columns[1], element_ok=kind == "list")
        if kind == "list" and isinstance(types[1], T.ArrayType) and not value.pickled:
            value = Column(types[1], False, None)
    spec = StateSpec(descriptor.name, kind)
    return _Input(spec, data, columns, key, user_key, value, schema_of(descriptor))
