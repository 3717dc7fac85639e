"""Building the event-time parts of a logical plan: group windows, over windows, watermarks.

Invariant: pure, as ``planner.py`` — each function resolves what it is given against its
input's columns, checks what Flink's validator checks about time (a time attribute of type
``TIMESTAMP``/``TIMESTAMP_LTZ``, an insert-only input, a window alias in the ``group_by``, one
over window per query, a supported watermark expression) and returns plan nodes, raising
``ValidationError`` at the call that is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cairn.common.config_registry import ConfigOption, register_option
from cairn.common.configuration import Configuration
from cairn.table.analysis import (
    AggCall,
    Columns,
    aggregate_output,
    contains_aggregate,
    is_aggregate_call,
    name_of,
    resolve,
    split_aggregates,
)
from cairn.table.changelog import changelog_mode
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col
from cairn.table.plan import (
    Calc,
    ChangelogMode,
    OverAggregate,
    PlanNode,
    WatermarkAssigner,
    WindowAggregate,
    with_inputs,
)
from cairn.table.planner import check_unique, project
from cairn.table.schema import Schema
from cairn.table.sql.expressions import parse_expression
from cairn.table.state_ttl import parse_state_ttl
from cairn.table.time_attributes import PROCTIME_TYPE, is_proctime
from cairn.table.types import DataType, DataTypes
from cairn.table.window import GroupWindow, OverWindow

_PROPERTIES = {
    "window_start": "start",
    "window_end": "end",
    "window_rowtime": "rowtime",
    "window_proctime": "proctime",
}


def _with_properties(expr: Expression, alias: str, wanted: list[str]) -> Expression:
    """``expr`` with ``w.start``/``w.end``/``w.rowtime`` replaced by fields ``$p<name>``."""
    if expr.kind == "call" and expr.name in _PROPERTIES:
        target = expr.args[0] if expr.args else None
        if target is None or target.kind != "field" or target.name != alias:
            raise ValidationError(f"Window property {expr} must be of the window '{alias}'")
        prop = _PROPERTIES[expr.name]
        if prop not in wanted:
            wanted.append(prop)
        return Expression("field", f"$p{prop}")
    if expr.kind == "field" and expr.name == alias:
        raise ValidationError(
            f"The window '{alias}' itself cannot be selected; select {alias}.start, .end or"
            " .rowtime"
        )
    if not expr.args:
        return expr
    return Expression(
        expr.kind,
        expr.name,
        tuple(_with_properties(a, alias, wanted) for a in expr.args),
        expr.value,
        expr.data_type,
        expr.names,
    )


def window_aggregate(
    node: PlanNode, window: GroupWindow, keys: Sequence[Expression], items: Sequence[Expression]
) -> PlanNode:
    """``window(w).group_by(keys, w).select(items)``: one insert-only row per key and window."""
    window.check()
    columns = node.columns
    time_index = columns.index(window.time_field)
    time_type = columns.columns[time_index].data_type
    if time_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise ValidationError(
            f"A group window expects a time attribute for grouping in a stream environment;"
            f" '{window.time_field}' is {time_type}"
        )
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY:
        raise ValidationError("A group window aggregate over an updating table is not built yet")
    key_exprs = [k for k in keys if not (k.kind == "field" and k.name == window.alias_name)]
    if len(key_exprs) == len(keys):
        raise ValidationError(
            f"The window alias '{window.alias_name}' must be one of the group_by fields"
        )
    key_indexes = []
    for k in key_exprs:
        if k.kind != "field":
            raise ValidationError(f"Group keys are columns here: add {k} as a column first")
        key_indexes.append(columns.index(k.name))
    wanted: list[str] = []
    rewritten = [_with_properties(e, window.alias_name, wanted) for e in items]
    processing = is_proctime(time_type)
    if "proctime" in wanted and not processing:
        raise ValidationError(
            f"Window '{window.alias_name}' is an event-time window: it has no proctime property"
        )
    prop_types = [_property_type(p, processing) for p in wanted]
    extended = Columns.of(
        [
            *zip(columns.names, columns.types, strict=True),
            *((f"$p{p}", t) for p, t in zip(wanted, prop_types, strict=True)),
        ]
    )
    prop_indexes = [len(columns) + i for i in range(len(wanted))]
    calls: list[AggCall] = []
    over_output: list[Expression] = []
    names: list[str] = []
    agg_index = 0
    for position, (item, new) in enumerate(zip(items, rewritten, strict=True)):
        over_output.append(split_aggregates(new, extended, calls, [*key_indexes, *prop_indexes]))
        is_agg = contains_aggregate(item.args[0] if item.kind == "alias" else item)
        name = name_of(item, position, agg_index if is_agg else None)
        if not is_agg and item.kind == "call" and item.name in _PROPERTIES:
            name = f"EXPR${agg_index}"
        names.append(name)
        if (is_agg or item.name in _PROPERTIES) and item.kind != "alias":
            agg_index += 1
    check_unique(names)
    agg_columns = aggregate_output(extended, [*key_indexes, *prop_indexes], calls)
    agg = WindowAggregate(
        columns=agg_columns,
        input=node,
        keys=tuple(key_indexes),
        window=window,
        time_index=time_index,
        calls=tuple(calls),
        properties=tuple(wanted),
    )
    rexes = [resolve(e, agg_columns) for e in over_output]
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    return Calc(columns=out, input=agg, projections=tuple(rexes))


def _property_type(prop: str, processing: bool) -> DataType:
    """A window property's type: ``TIMESTAMP(3)``; a processing-time window's time
    (``rowtime``/``proctime``, the TVF's ``window_time``) is a processing-time attribute."""
    if processing and prop in ("rowtime", "proctime"):
        return PROCTIME_TYPE
    return DataTypes.TIMESTAMP(3, False)


def _strip_over(expr: Expression, aliases: set[str], inside: bool = False) -> Expression:
    """``agg.over(col('w'))`` → ``agg``; an aggregate outside ``over`` is refused."""
    if expr.kind == "call" and expr.name == "over":
        target = expr.args[1]
        if target.kind != "field" or target.name not in aliases:
            raise ValidationError(f"Over window '{target}' is not defined; over_window(...) it")
        return _strip_over(expr.args[0], aliases, inside=True)
    if not inside and is_aggregate_call(expr):
        raise ValidationError(f"Aggregate {expr} needs an over window here: .over(col('w'))")
    if not expr.args:
        return expr
    return Expression(
        expr.kind,
        expr.name,
        tuple(_strip_over(a, aliases, inside) for a in expr.args),
        expr.value,
        expr.data_type,
        expr.names,
    )


def over_aggregate(node: PlanNode, window: OverWindow, items: Sequence[Expression]) -> PlanNode:
    """``over_window(w).select(items)``: each row with its aggregates over ``w``."""
    if not window.alias_name:
        raise ValidationError("An over window needs an alias: .alias('w')")
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY:
        raise ValidationError("An over window over an updating table is not built yet")
    columns = node.columns
    time_index = columns.index(window.order_by)
    time_type = columns.columns[time_index].data_type
    if time_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise ValidationError(
            f"An over window is ordered by a time attribute; '{window.order_by}' is {time_type}"
        )
    if is_proctime(time_type):
        raise ValidationError(
            f"An over window ordered by the processing-time attribute '{window.order_by}' is"
            " not built yet: order it by an event-time attribute"
        )
    keys = tuple(columns.index(k) for k in window.partition_by)
    every = list(range(len(columns)))
    calls: list[AggCall] = []
    over_output: list[Expression] = []
    names: list[str] = []
    agg_index = 0
    for position, item in enumerate(items):
        stripped = _strip_over(item, {window.alias_name})
        over_output.append(split_aggregates(stripped, columns, calls, every))
        is_agg = contains_aggregate(stripped.args[0] if stripped.kind == "alias" else stripped)
        names.append(name_of(item, position, agg_index if is_agg else None))
        if is_agg and item.kind != "alias":
            agg_index += 1
    check_unique(names)
    agg_columns = aggregate_output(columns, every, calls)
    agg = OverAggregate(
        columns=agg_columns,
        input=node,
        keys=keys,
        window=window,
        time_index=time_index,
        calls=tuple(calls),
    )
    rexes = [resolve(e, agg_columns) for e in over_output]
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    return Calc(columns=out, input=agg, projections=tuple(rexes))


SOURCE_IDLE_TIMEOUT = register_option(
    ConfigOption(
        "table.exec.source.idle-timeout",
        "duration",
        0,
        "When a source subtask receives no rows for this long it is marked idle and does not"
        " hold back the watermark of the operators after it; 0 (the default) never.",
    )
)


def with_idle_timeout(node: PlanNode, idle_ms: int) -> PlanNode:
    """``node``'s plan with ``idle_ms`` as every watermark assigner's idle timeout."""
    inputs = node.inputs
    if inputs:
        filled = tuple(with_idle_timeout(i, idle_ms) for i in inputs)
        if any(f is not i for f, i in zip(filled, inputs, strict=True)):
            node = with_inputs(node, filled)
    if isinstance(node, WatermarkAssigner) and node.idle_timeout_ms != idle_ms:
        return replace(node, idle_timeout_ms=idle_ms)
    return node


def source_idle_timeout_ms(configuration: Configuration | None) -> int:
    """``table.exec.source.idle-timeout`` of a table configuration, in milliseconds."""
    if configuration is None:
        return 0
    raw = configuration.get_string(SOURCE_IDLE_TIMEOUT.key, None)
    return 0 if raw is None else parse_state_ttl(raw, SOURCE_IDLE_TIMEOUT.key)


def is_source_watermark(text: str) -> bool:
    """``SOURCE_WATERMARK()``: the source's own watermarks (a DataStream's).

    >>> is_source_watermark(" source_watermark( ) "), is_source_watermark("ts")
    (True, False)
    """
    return "".join(text.split()).upper() == "SOURCE_WATERMARK()"


def watermark(node: PlanNode, column: str, text: str) -> PlanNode:
    """``WATERMARK FOR column AS text``: ``column`` or ``column - INTERVAL 'n' unit``."""
    if is_source_watermark(text):
        raise ValidationError(
            "SOURCE_WATERMARK() takes the watermarks of a source that has its own: in Cairn,"
            " a DataStream's (from_data_stream); declare `column - INTERVAL 'n' unit` here"
        )
    columns = node.columns
    index = columns.index(column)
    time_type = columns.columns[index].data_type
    if is_proctime(time_type):
        raise ValidationError(
            f"A watermark can not be defined for a processing-time attribute: '{column}'"
        )
    if time_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise ValidationError(
            f"Invalid data type of time field for watermark definition. The field must be of"
            f" type TIMESTAMP(p) or TIMESTAMP_LTZ(p), '{column}' is {time_type}"
        )
    expr = parse_expression(text, columns.names)
    delay: int | None = None
    if expr.kind == "field" and expr.name == column:
        delay = 0
    elif expr.kind == "call" and expr.name == "minus":
        base, amount = expr.args
        interval = amount.kind == "literal" and amount.data_type is not None
        if base.kind == "field" and base.name == column and interval:
            assert amount.data_type is not None
            if amount.data_type.root == "INTERVAL":
                delay = int(amount.value)
    if delay is None:
        raise ValidationError(
            f"Watermark expression '{text}' is not supported: Cairn takes `{column}` or"
            f" `{column} - INTERVAL 'n' unit` (bounded out-of-orderness)"
        )
    return WatermarkAssigner(columns=columns, input=node, time_index=index, delay_ms=delay)


def declared_table(scan: PlanNode, schema: Schema) -> PlanNode:
    """A source's rows as a schema declares them: its physical and metadata columns in the
    declared order (a metadata column cast to its declared type when the connector's
    differs), its computed columns (``PROCTIME()``: a processing-time attribute), and its
    watermark. A schema declaring no physical column (``from_data_stream``'s) keeps all
    the source's, first, as Flink derives them."""
    physical = scan.columns
    items: list[Expression] = []
    if not any(c.is_physical for c in schema.columns):
        items += [col(n) for n in physical.names if n not in {c.name for c in schema.columns}]
    for c in schema.columns:
        if c.is_metadata and c.name not in physical.names:
            raise ValidationError(
                f"Metadata column '{c.name}' ({c.key}): this source offers no metadata"
            )
        if c.expression is not None:
            items.append(parse_expression(c.expression, physical.names).alias(c.name))
        elif c.is_metadata:
            offered = physical.columns[physical.index(c.name)].data_type
            same = c.data_type is None or offered.nullable_() == c.data_type.nullable_()
            item = col(c.name) if same else col(c.name).cast(c.data_type).alias(c.name)  # type: ignore[arg-type]
            items.append(item)
        else:
            physical.index(c.name)  # a declared column the source does not have fails here
            items.append(col(c.name))
    node = project(scan, items) if items else scan
    if schema.watermark is not None:
        node = watermark(node, *schema.watermark)
    return node
