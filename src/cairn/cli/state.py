"""``cairn state PATH``: the state of a savepoint, a checkpoint or a job's latest checkpoint,
listed or queried with Spark SQL (the state processor, ``cairn.state_processor``).

Invariant: read-only. A job directory (``<checkpoint storage>/<job id>``, running or not) is
read from a copy of its newest completed checkpoint (``SavepointReader.read_latest``), so the
job is not disturbed and its cleanup does not matter; the copy is removed when the command
ends (kept where ``--snapshot-dir`` put it). Column types come from the types the job
declared (the metadata records them): a value whose type has no Spark type is shown as its
``repr``; keys are read as ``--key-type`` (default ``String``).

>>> type_info_named("long"), type_info_named("TupleTypeInfo(Long, Long)")
(Long, None)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cairn.cli.options import parse_conf_items

__all__ = ["add_state_command", "cmd_state", "type_info_named"]

_SCALARS = ("String", "Long", "Integer", "Double", "Float", "Boolean", "Short", "Byte")
_TYPES = {"String": "STRING", "Long": "LONG", "Integer": "INT", "Double": "DOUBLE"}
_TYPES |= {"Float": "FLOAT", "Boolean": "BOOLEAN", "Short": "SHORT", "Byte": "BYTE"}


def type_info_named(name: str | None) -> Any:
    """The type info of a scalar type name (``Long``, ``long``, ``Integer``, ``int``...),
    ``None`` for any other name (the column is then pickled)."""
    from cairn.common.typeinfo import Types

    if name is None:
        return None
    aliases = {"int": "Integer", "str": "String", "bool": "Boolean"}
    wanted = aliases.get(name.lower(), name)
    for scalar in _SCALARS:
        if scalar.lower() == wanted.lower():
            return getattr(Types, _TYPES[scalar])()
    return None


def add_state_command(sub: Any) -> None:
    """Register ``cairn state`` on the ``cairn`` parser's subcommands."""
    st = sub.add_parser(
        "state",
        help="list or query (Spark SQL) the keyed state of a savepoint, checkpoint or a "
        "job's latest checkpoint (read from a copy: a running job is not disturbed)",
    )
    st.add_argument("path", help="savepoint or chk-<n> directory, or a job's checkpoint directory")
    st.add_argument("--uid", default=None, help="the operator (its uid)")
    st.add_argument("--state", default=None, help="the keyed state (its name)")
    st.add_argument(
        "--sql",
        default=None,
        metavar="QUERY",
        help="a Spark SQL query over the view 'state' (default: SELECT * FROM state)",
    )
    st.add_argument(
        "--key-type",
        default="String",
        help="type of the keys: String (default), Long, Integer, Double, ...",
    )
    st.add_argument("--limit", type=int, default=20, help="rows shown (default 20)")
    st.add_argument("--json", action="store_true", help="print rows as JSON lines")
    st.add_argument(
        "--snapshot-dir",
        default=None,
        metavar="DIR",
        help="where a job's latest checkpoint is copied (kept; default: a temporary "
        "directory, removed at the end)",
    )
    st.add_argument("--master", default=None, help="Spark master URL (default: local)")
    st.add_argument("--signing-key-file", default=None, metavar="FILE")
    st.add_argument(
        "-D", "--conf", action="append", metavar="KEY=VALUE", help="storage configuration"
    )
    st.set_defaults(func=cmd_state)


def cmd_state(args: argparse.Namespace) -> int:
    from cairn.cli.options import signing_key_from_file
    from cairn.common.config_options import validate_configuration
    from cairn.common.exceptions import ConfigurationError
    from cairn.common.storage_options import storage_options_for
    from cairn.deploy.spark_session import get_or_create_spark
    from cairn.state_processor import SavepointReader
    from cairn.state_processor.live import is_job_directory

    if args.sql and not (args.uid and args.state):
        raise ConfigurationError("--sql needs --uid and --state (the query reads view 'state')")
    if args.state and not args.uid:
        raise ConfigurationError("--state needs --uid (the operator whose state it is)")
    resolved = validate_configuration(parse_conf_items(args.conf))
    options = storage_options_for(args.path, resolved)
    key = signing_key_from_file(args.signing_key_file)
    live = is_job_directory(args.path, options)
    # Before Spark starts: a path with nothing to read costs no JVM and prints one line.
    from cairn.checkpoint.loading import resolve_checkpoint_dirs

    resolve_checkpoint_dirs(args.path, options)
    spark = get_or_create_spark(args.master, 1, {})
    if live:
        reader = SavepointReader.read_latest(
            spark, args.path, snapshot_dir=args.snapshot_dir, storage_options=options,
            signing_key=key,
        )  # fmt: skip
        where = f"chk-{reader.checkpoint.checkpoint_id} of {args.path}, read from a copy"
    else:
        reader = SavepointReader.read(spark, args.path, storage_options=options, signing_key=key)
        where = reader.checkpoint.directory
    with reader:
        print(f"cairn state: {where}", file=sys.stderr)
        if not args.state:
            _list_states(reader, args.uid)
            return 0
        df = _state_frame(reader, args.uid, args.state, args.key_type)
        df.createOrReplaceTempView("state")
        result = spark.sql(args.sql or "SELECT * FROM state")
        _print(result, args.limit, args.json)
    return 0


def _list_states(reader: Any, uid: str | None) -> None:
    for op_uid in [uid] if uid else reader.uids:
        op = reader.operator(op_uid)
        for name, kind in sorted(reader.keyed_state_kinds(op_uid).items()):
            print(f"{op_uid}\tkeyed\t{name}\t{kind}")
        modes = {
            n: m for s in op.subtasks.values() for h in s.operator for n, (m, _) in h.states.items()
        }
        for name, mode in sorted(modes.items()):
            print(f"{op_uid}\toperator\t{name}\t{mode}")


def _state_frame(reader: Any, uid: str, name: str, key_type: str) -> Any:
    """The state as a DataFrame, its pickled columns shown as ``repr`` strings."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from cairn.state_processor import UnknownStateError, unpickle
    from cairn.state_processor.reader import KEYED_KINDS

    kinds = reader.keyed_state_kinds(uid)
    if name not in kinds:
        known = ", ".join(f"{n!r} ({k})" for n, k in sorted(kinds.items()))
        raise UnknownStateError(f"operator uid {uid!r} has no keyed state {name!r}; it has {known}")
    kind = kinds[name]
    types: tuple[str | None, ...] = ()
    for s in reader.operator(uid).subtasks.values():
        if name in s.keyed_schema:
            types = s.keyed_schema[name].types
    descriptor = _descriptor(name, kind, types)
    assert kind in KEYED_KINDS
    key = type_info_named(key_type)
    if key is None and key_type.lower() != "pickled":
        from cairn.common.exceptions import ConfigurationError

        raise ConfigurationError(f"--key-type {key_type!r}: give String, Long, Integer, ...")
    df = reader.read_keyed_state(uid, descriptor, key_type=key)
    shown = F.udf(lambda b: None if b is None else repr(unpickle(b)), T.StringType())
    return df.select(
        *[
            shown(F.col(f.name)).alias(f.name) if isinstance(f.dataType, T.BinaryType) else f.name
            for f in df.schema.fields
        ]
    )


def _descriptor(name: str, kind: str, types: tuple[str | None, ...]) -> Any:
    from cairn.api.state import (
        AggregatingStateDescriptor,
        ListStateDescriptor,
        MapStateDescriptor,
        ReducingStateDescriptor,
        ValueStateDescriptor,
    )

    infos = [type_info_named(t) for t in types] or [None]
    if kind == "map":
        infos = [*infos, None, None][:2]
        return MapStateDescriptor(name, infos[0], infos[1])
    if kind == "list":
        return ListStateDescriptor(name, infos[0])
    if kind == "reducing":
        return ReducingStateDescriptor(name, _NotCalled(), infos[0])
    if kind == "aggregating":
        return AggregatingStateDescriptor(name, _NotCalled(), infos[0])
    return ValueStateDescriptor(name, infos[0])


class _NotCalled:
    """The function of a descriptor that only reads: reading never reduces or aggregates."""

    def _never(self, *_: Any) -> Any:
        raise AssertionError("not called when reading")

    reduce = create_accumulator = add = get_result = _never


def _print(df: Any, limit: int, as_json: bool) -> None:
    if as_json:
        for row in df.limit(limit).collect():
            print(json.dumps(row.asDict(recursive=True), default=str))
        return
    df.show(limit, truncate=False)
