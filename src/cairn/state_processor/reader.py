"""Reading a savepoint's (or retained checkpoint's) state as Spark DataFrames.

Invariant: state is only ever decoded inside Spark tasks: the driver reads the metadata
(verified with the signing key, if one is given) and plans key-group slices; each task opens
the state files of its slice through the checkpoint storage reader (ranged reads, CRC-32 and,
with a key, SHA-256 checked) and yields rows. The driver decodes at most the first section of
each state file, to check the state's name and kind before any job runs.

>>> from cairn.api.state import ValueStateDescriptor
>>> # reader = SavepointReader.read(spark, "file:///savepoints/sp-1")
>>> # reader.read_keyed_state("keyed-sum", ValueStateDescriptor("sum", Types.LONG())).show()
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from cairn.api.state import ListStateDescriptor, MapStateDescriptor, StateDescriptor
from cairn.checkpoint.handles import OperatorStateHandle
from cairn.checkpoint.locations import protocol_of, remove_tree, resolve
from cairn.checkpoint.metadata import CompletedCheckpoint, OperatorMetadata
from cairn.checkpoint.storage import load_checkpoint, open_reader
from cairn.common.typeinfo import Types
from cairn.ids import OperatorUid
from cairn.settings import SigningKey
from cairn.state.snapshot_format import decode_section, dumps, read_sections
from cairn.state_processor.columns import Column, spark_column, to_spark
from cairn.state_processor.errors import (
    StateProcessorError,
    UnknownOperatorError,
    UnknownStateError,
    ValueTypeError,
)
from cairn.state_processor.key_group_slices import (
    KeyedSlice,
    RocksDBSlice,
    default_parallelism,
    plan_keyed_slices,
    plan_rocksdb_slices,
    split_handles,
)
from cairn.state_processor.live import new_snapshot_dir, snapshot_latest
from cairn.state_processor.rocksdb_sections import rocksdb_sections, rocksdb_state_kinds
from cairn.state_processor.sections import Section, read_slice, state_kinds, state_rows

__all__ = ["ListLayout", "SavepointReader", "signing_key_of"]

log = logging.getLogger(__name__)

KEYED_KINDS = ("value", "list", "map", "reducing", "aggregating")


class ListLayout(enum.Enum):
    """How list state is shown: a row per element, or a row per key with an array."""

    EXPLODED = "exploded"
    ARRAYS = "arrays"


def signing_key_of(key: SigningKey | str | None) -> SigningKey | None:
    """``key`` as a ``SigningKey`` (text is parsed as ``cairn.checkpoint.signing-key`` is)."""
    return SigningKey.parse(key) if isinstance(key, str) else key


@dataclass(frozen=True)
class CheckpointSource:
    """Where tasks read from (picklable: shipped to every task)."""

    directory: str
    storage_options: Mapping[str, Any]
    require_digests: bool

    def reader(self) -> Any:
        return open_reader(self.directory, self.storage_options, self.require_digests)


Slice = KeyedSlice | RocksDBSlice
"""One task's share: heap-format sections, or RocksDB databases."""


def _sections(
    piece: Slice, source: CheckpointSource, uid: str, now_ms: int, name: str
) -> Iterator[tuple[int, Section]]:
    if isinstance(piece, RocksDBSlice):
        return rocksdb_sections(piece, source.reader(), uid, now_ms, {name})
    return read_slice(piece, source.reader(), uid)


def _has_state(piece: Slice) -> bool:
    return bool(piece.handles if isinstance(piece, RocksDBSlice) else piece.files)


@dataclass(frozen=True)
class _KeyedReadTask:
    source: CheckpointSource
    uid: str
    name: str
    kind: str
    exploded: bool
    columns: tuple[Column, ...]
    pickled_elements: bool  # list state as arrays whose elements have no Spark type
    now_ms: int  # when the checkpoint was taken (RocksDB: TTL cleanup of full snapshots)

    def __call__(self, piece: Slice) -> Iterator[tuple[Any, ...]]:
        sections = _sections(piece, self.source, self.uid, self.now_ms, self.name)
        for row in state_rows(sections, self.uid, self.name, self.kind, self.exploded):
            try:
                if self.pickled_elements:
                    row = (row[0], [dumps(v) for v in row[1]])
                yield tuple(
                    to_spark(v, c, n) for v, c, n in zip(row, self.columns, _NAMES, strict=False)
                )
            except ValueTypeError as exc:
                raise ValueTypeError(
                    f"operator uid {self.uid!r}, state {self.name!r}, key {row[0]!r}: {exc}; "
                    "pass key_type= or schema= to read it"
                ) from None


_NAMES = ("key", "user_key", "value")


@dataclass(frozen=True)
class _OperatorReadTask:
    source: CheckpointSource
    uid: str
    name: str
    exploded: bool
    column: Column

    def __call__(self, handle: OperatorStateHandle) -> Iterator[tuple[Any, ...]]:
        reader = self.source.reader()
        try:
            raw = read_sections(reader, handle.path, {"section": handle.section}, "operator state")
            lists = decode_section(raw["section"], handle.path, "operator state", "section")
        except Exception as exc:
            raise StateProcessorError(f"operator uid {self.uid!r}: {exc}") from exc
        values = lists.get(self.name, [])
        try:
            if self.exploded:
                for v in values:
                    yield (to_spark(v, self.column, "value"),)
            elif values:
                yield ([to_spark(v, self.column, "value") for v in values],)
        except ValueTypeError as exc:
            raise ValueTypeError(
                f"operator uid {self.uid!r}, operator state {self.name!r}: {exc}"
            ) from None


def _sample_kinds(piece: Slice, source: CheckpointSource, uid: str) -> dict[str, str]:
    if isinstance(piece, RocksDBSlice):
        return rocksdb_state_kinds(piece, source.reader(), uid)
    return state_kinds(read_slice(piece, source.reader(), uid))


class SavepointReader:
    """The state of one savepoint or retained checkpoint, per operator uid, as DataFrames.

    Flink's ``SavepointReader`` for Python and Spark: ``read`` it, then ask for a keyed
    state (``read_keyed_state``) or an operator list state (``read_list_state``,
    ``read_union_state``) of an operator by its ``uid``.
    """

    def __init__(
        self,
        spark: SparkSession,
        checkpoint: CompletedCheckpoint,
        storage_options: Mapping[str, Any] | None = None,
        require_digests: bool = False,
    ) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self._source = CheckpointSource(
            checkpoint.directory, dict(storage_options or {}), require_digests
        )
        self._owned_copy: str | None = None  # a snapshot ``read_latest`` made; ``close`` removes it

    @classmethod
    def read(
        cls,
        spark: SparkSession,
        path: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | str | None = None,
    ) -> SavepointReader:
        """Open the savepoint or checkpoint at ``path`` (a directory, its ``_metadata``, or a
        job's checkpoint directory: its newest checkpoint). ``storage_options`` go to fsspec
        (e.g. ``cairn.common.storage_options.s3_storage_options(...)`` for ``s3://``); with
        ``signing_key`` the metadata must be signed with it and every state file is checked
        against its SHA-256 before it is decoded.
        """
        key = signing_key_of(signing_key)
        checkpoint = load_checkpoint(path, storage_options, key)
        return cls(spark, checkpoint, storage_options, require_digests=key is not None)

    @classmethod
    def read_latest(
        cls,
        spark: SparkSession,
        job_dir: str,
        *,
        snapshot_dir: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | str | None = None,
    ) -> SavepointReader:
        """The newest completed checkpoint of the job whose checkpoint directory is
        ``job_dir`` (``<checkpoint storage>/<job id>``), running or not, read from a copy
        (``cairn.state_processor.live``): the job is not disturbed, and what it deletes
        meanwhile does not matter. The copy goes to ``snapshot_dir`` (empty or missing; on a
        cluster, one every executor reads, on the store's filesystem) or to a new local
        temporary directory, which ``close()`` (or the ``with`` block) removes.

        >>> # with SavepointReader.read_latest(spark, "s3://ckpt/<job-id>",
        >>> #                                  snapshot_dir="s3://tmp/reads/1") as r: ...
        """
        key = signing_key_of(signing_key)
        target = snapshot_dir or new_snapshot_dir()
        copy = snapshot_latest(job_dir, target, storage_options, key)
        same = protocol_of(target) == protocol_of(job_dir)
        reader = cls(
            spark, copy, storage_options if same else None, require_digests=key is not None
        )
        reader._owned_copy = None if snapshot_dir else target
        log.info("read chk-%d of %s from its copy %s", copy.checkpoint_id, job_dir, target)
        return reader

    def close(self) -> None:
        """Remove the copy ``read_latest`` made in a temporary directory (DataFrames of this
        reader cannot be read after); nothing for other readers."""
        if self._owned_copy is not None:
            remove_tree(resolve(self._owned_copy, None))
            self._owned_copy = None

    def __enter__(self) -> SavepointReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------ operators

    @property
    def uids(self) -> list[str]:
        """Uids of the operators with state in this savepoint."""
        return sorted(self.checkpoint.metadata.operators)

    def operator(self, uid: str) -> OperatorMetadata:
        """The metadata of operator ``uid``.

        Raises:
            UnknownOperatorError: no operator ``uid`` in this savepoint (names the ones there).
        """
        op = self.checkpoint.metadata.operators.get(OperatorUid(uid))
        if op is None:
            raise UnknownOperatorError(
                f"{self.checkpoint.directory}: no operator with uid {uid!r}; the savepoint "
                f"holds state of {', '.join(repr(u) for u in self.uids) or 'no operator'}"
            )
        return op

    def _slices(self, uid: str, num_partitions: int | None) -> list[Slice]:
        op = self.operator(uid)
        heap, rocks = split_handles([h for s in op.subtasks.values() for h in s.keyed], uid)
        if rocks:  # by default a task per database: each is downloaded once
            return list(plan_rocksdb_slices(rocks, op.max_parallelism, num_partitions, uid))
        spark_parallelism = self.spark.sparkContext.defaultParallelism
        n = num_partitions or default_parallelism(op.max_parallelism, spark_parallelism)
        return list(plan_keyed_slices(heap, op.max_parallelism, n, uid))

    def _recorded_kinds(self, uid: str) -> dict[str, str]:
        """Name -> kind of the keyed states the metadata records of a RocksDB operator (the
        schema each subtask declared); empty for heap-format state, whose first sections are
        cheap to look at, and for checkpoints that predate the record."""
        op = self.operator(uid)
        _heap, rocks = split_handles([h for s in op.subtasks.values() for h in s.keyed], uid)
        if not rocks:
            return {}
        return {n: sc.kind for s in op.subtasks.values() for n, sc in s.keyed_schema.items()}

    # ------------------------------------------------------------------------ keyed state

    def keyed_state_kinds(self, uid: str) -> dict[str, str]:
        """Name -> kind (``"value"``, ``"list"``, ...) of every keyed state of ``uid``; a Spark
        job that decodes every section (each task returns only the names it saw)."""
        slices = [s for s in self._slices(uid, None) if _has_state(s)]
        if not slices:
            return {}
        recorded = self._recorded_kinds(uid)
        if recorded:
            return recorded
        task = _KindsTask(self._source, uid)
        found = self.spark.sparkContext.parallelize(slices, len(slices)).map(task).collect()
        kinds: dict[str, str] = {}
        for part in found:
            for name, kind in part.items():
                kinds.setdefault(name, kind)
        return kinds

    def _check_state(self, uid: str, slices: list[Slice], name: str, kind: str) -> None:
        """Fail early (before the DataFrame's job runs) on a wrong name or kind: look at the
        first section of each file (RocksDB: at the kinds the metadata records), and only if
        the name is not there, at all of them."""
        sample = [
            KeyedSlice(0, s.key_groups, (type(f)(f.path, f.sections[:1]),))
            for s in slices
            if isinstance(s, KeyedSlice)
            for f in s.files[:1]
        ]
        kinds: dict[str, str] = self._recorded_kinds(uid)
        for piece in sample:
            kinds.update(_sample_kinds(piece, self._source, uid))
        if name not in kinds:
            kinds = self.keyed_state_kinds(uid)
        if name not in kinds:
            known = ", ".join(f"{n!r} ({k})" for n, k in sorted(kinds.items()))
            raise UnknownStateError(
                f"operator uid {uid!r} has no keyed state {name!r}; it has "
                f"{known or 'no keyed state'}"
            )
        if kinds[name] != kind:
            raise UnknownStateError(
                f"operator uid {uid!r}: state {name!r} is {kinds[name]} state, but the "
                f"descriptor describes {kind} state"
            )

    def read_keyed_state(
        self,
        uid: str,
        descriptor: StateDescriptor,
        *,
        key_type: Any = Types.STRING(),
        list_layout: ListLayout = ListLayout.EXPLODED,
        schema: T.StructType | None = None,
        num_partitions: int | None = None,
    ) -> DataFrame:
        """Keyed state ``descriptor.name`` of operator ``uid``: columns ``key, value``; map
        state ``key, user_key, value``; list state one row per element, or with
        ``ListLayout.ARRAYS`` one row per key with an array ``value``.

        Column types follow ``key_type`` and the descriptor's type info (``Types.LONG()`` is
        ``bigint``, ``Types.ROW_NAMED`` a struct, ...); a type info without a Spark type
        (``None``, ``Types.PICKLED_BYTE_ARRAY()``) gives a ``binary`` column of pickles
        (``cairn.state_processor.unpickle``). ``schema`` sets the columns' names and types
        instead. Values with a TTL are given without their timestamps. The DataFrame is read
        by ``num_partitions`` tasks (default: Spark's default parallelism), each reading a
        contiguous range of key groups.

        Raises:
            UnknownOperatorError: no such uid. UnknownStateError: no such state, or it is of
            another kind than the descriptor. ValueTypeError (when the job runs): a key or
            value does not fit its column.
        """
        kind = _keyed_kind(descriptor)
        slices = [s for s in self._slices(uid, num_partitions) if _has_state(s)]
        if not slices:
            raise UnknownStateError(
                f"operator uid {uid!r} has no keyed state (state {descriptor.name!r} asked for)"
            )
        self._check_state(uid, slices, descriptor.name, kind)
        columns, pickled_elements = _keyed_columns(descriptor, kind, key_type, list_layout)
        if schema is not None:
            columns = _apply_schema(schema, columns, uid, descriptor.name)
        struct = schema or T.StructType(
            [T.StructField(n, c.data_type) for n, c in zip(_names(kind), columns, strict=True)]
        )
        exploded = list_layout is ListLayout.EXPLODED
        task = _KeyedReadTask(
            self._source,
            uid,
            descriptor.name,
            kind,
            exploded,
            columns,
            pickled_elements,
            self.checkpoint.metadata.trigger_ms,
        )
        log.info(
            "reading state %r of %r from %s in %d tasks",
            descriptor.name,
            uid,
            self.checkpoint.directory,
            len(slices),
        )
        rdd = self.spark.sparkContext.parallelize(slices, len(slices)).flatMap(task)
        return self.spark.createDataFrame(rdd, struct, verifySchema=False)

    # --------------------------------------------------------------------- operator state

    def read_list_state(
        self,
        uid: str,
        descriptor: ListStateDescriptor,
        *,
        list_layout: ListLayout = ListLayout.EXPLODED,
    ) -> DataFrame:
        """Operator list state (even-split redistribution) ``descriptor.name`` of ``uid``: a
        ``value`` column, one row per element (or per old subtask, as an array)."""
        return self._operator_state(uid, descriptor, "split", list_layout)

    def read_union_state(
        self,
        uid: str,
        descriptor: ListStateDescriptor,
        *,
        list_layout: ListLayout = ListLayout.EXPLODED,
    ) -> DataFrame:
        """Operator union list state ``descriptor.name`` of ``uid`` (as ``read_list_state``)."""
        return self._operator_state(uid, descriptor, "union", list_layout)

    def _operator_state(
        self, uid: str, descriptor: ListStateDescriptor, mode: str, layout: ListLayout
    ) -> DataFrame:
        if not isinstance(descriptor, ListStateDescriptor):
            raise StateProcessorError(
                f"operator state is list state: pass a ListStateDescriptor, got {descriptor!r}"
            )
        op = self.operator(uid)
        handles = [h for s in op.subtasks.values() for h in s.operator]
        modes = {n: m for h in handles for n, (m, _count) in h.states.items()}
        name = descriptor.name
        if modes.get(name) != mode:
            known = ", ".join(f"{n!r} ({m})" for n, m in sorted(modes.items()))
            what = "no" if name not in modes else f"{modes[name]} state, not {mode}"
            raise UnknownStateError(
                f"operator uid {uid!r}: operator state {name!r}: {what}; it has "
                f"{known or 'no operator state'}"
            )
        wanted = [h for h in handles if name in h.states]
        column = spark_column(descriptor.elem_type_info)
        exploded = layout is ListLayout.EXPLODED
        data_type = column.data_type if exploded else T.ArrayType(column.data_type)
        struct = T.StructType([T.StructField("value", data_type)])
        task = _OperatorReadTask(self._source, uid, name, exploded, column)
        rdd = self.spark.sparkContext.parallelize(wanted, max(1, len(wanted))).flatMap(task)
        return self.spark.createDataFrame(rdd, struct, verifySchema=False)


@dataclass(frozen=True)
class _KindsTask:
    source: CheckpointSource
    uid: str

    def __call__(self, piece: Slice) -> dict[str, str]:
        return _sample_kinds(piece, self.source, self.uid)


def _keyed_kind(descriptor: StateDescriptor) -> str:
    if not isinstance(descriptor, StateDescriptor) or descriptor.kind not in KEYED_KINDS:
        raise StateProcessorError(f"not a keyed state descriptor: {descriptor!r}")
    return descriptor.kind


def _names(kind: str) -> tuple[str, ...]:
    return ("key", "user_key", "value") if kind == "map" else ("key", "value")


def _keyed_columns(
    descriptor: StateDescriptor, kind: str, key_type: Any, layout: ListLayout
) -> tuple[tuple[Column, ...], bool]:
    key = spark_column(key_type)
    if isinstance(descriptor, MapStateDescriptor):
        return (
            key,
            spark_column(descriptor.key_type_info),
            spark_column(descriptor.value_type_info),
        ), False
    value = spark_column(descriptor.type_info)
    if kind == "list" and layout is ListLayout.ARRAYS:
        if value.pickled:
            return (key, Column(T.ArrayType(T.BinaryType()))), True
        return (key, Column(T.ArrayType(value.data_type), type_info=None)), False
    return (key, value), False


def _apply_schema(
    schema: T.StructType, columns: tuple[Column, ...], uid: str, name: str
) -> tuple[Column, ...]:
    if len(schema.fields) != len(columns):
        raise StateProcessorError(
            f"operator uid {uid!r}, state {name!r}: the schema has {len(schema.fields)} "
            f"fields, the state has {len(columns)} columns (key, "
            f"{'user_key, value' if len(columns) == 3 else 'value'})"
        )
    # A binary field stays a column of pickles where the descriptor has no Spark type.
    return tuple(
        Column(f.dataType, pickled=c.pickled and isinstance(f.dataType, T.BinaryType))
        for f, c in zip(schema.fields, columns, strict=True)
    )
