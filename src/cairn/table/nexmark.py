"""The ``nexmark`` table source (nexmark-flink's ``'connector' = 'nexmark'``).

Invariant: the table's rows are the events of one ``NexmarkConfig`` (its options, as
nexmark-flink's ``NexmarkSourceOptions`` name them, plus Cairn's ``seed``, ``base-time`` and
``out-of-order.group-size``), in the physical layout of nexmark-flink's ``datagen`` table:
``event_type INT``, then the ``person``, ``auction`` and ``bid`` ROWs of 8, 10 and 7 fields
(names are the DDL's, as in nexmark-flink; the shape is checked when the table is planned).
Event ``n`` is the same at any parallelism (``cairn.datastream.connectors.nexmark``); the
options nexmark-flink accepts without using (``next-event.rate``, ``rate.shape``,
``rate.period``, ``rate.limited``) are accepted and have no effect, as there.

>>> config = nexmark_config("bids", {"events.num": "1000", "bid.avg-size": "1kb"})
>>> config.events_num, config.avg_bid_byte_size, config.first_event_rate
(1000, 1024, 10000)
>>> nexmark_config("t", {"events.num": "0", "stop-at": "5"}).events_num
5
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cairn.common.config_values import parse_duration_ms, parse_memory_bytes
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.connectors.nexmark import NEXMARK_ROW_FIELDS, NexmarkConfig, nexmark_source
from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.plan import StreamScan
from cairn.table.source_reuse import reused
from cairn.table.types import RowType

__all__ = ["NEXMARK_OPTIONS", "nexmark_config", "nexmark_options", "nexmark_scan"]


def _int(value: str) -> int:
    return int(value.strip())


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def _shape(value: str) -> str:
    if value.strip().upper() not in ("SQUARE", "SINE"):
        raise ValueError(f"expected SQUARE or SINE, got {value!r}")
    return value


#: Each option: its parser and the ``NexmarkConfig`` field it sets (None: no effect).
NEXMARK_OPTIONS: dict[str, tuple[Callable[[str], Any], str | None]] = {
    "first-event.rate": (_int, "first_event_rate"),
    "next-event.rate": (_int, None),
    "rate.shape": (_shape, None),
    "rate.period": (parse_duration_ms, None),
    "rate.limited": (_bool, None),
    "events.num": (_int, "events_num"),
    "stop-at": (_int, None),
    "keep-alive": (_bool, None),
    "max-emit-speed": (_bool, "max_emit_speed"),
    "person.proportion": (_int, "person_proportion"),
    "auction.proportion": (_int, "auction_proportion"),
    "bid.proportion": (_int, "bid_proportion"),
    "person.avg-size": (parse_memory_bytes, "avg_person_byte_size"),
    "auction.avg-size": (parse_memory_bytes, "avg_auction_byte_size"),
    "bid.avg-size": (parse_memory_bytes, "avg_bid_byte_size"),
    "bid.hot-ratio.auctions": (_int, "hot_auction_ratio"),
    "bid.hot-ratio.bidders": (_int, "hot_bidders_ratio"),
    "auction.hot-ratio.sellers": (_int, "hot_sellers_ratio"),
    # Cairn's own: the stream's random draws, first event time and scrambling
    "seed": (_int, "seed"),
    "base-time": (_int, "base_time_ms"),
    "out-of-order.group-size": (_int, "out_of_order_group_size"),
}

_SHAPE = (("event_type", 0), ("person", 8), ("auction", 10), ("bid", 7))


def nexmark_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of a nexmark table."""
    return set(NEXMARK_OPTIONS)


def nexmark_config(name: str, options: Mapping[str, str]) -> NexmarkConfig:
    """The generator configuration of table ``name``'s options (keys already checked)."""
    values: dict[str, Any] = {}
    parsed: dict[str, Any] = {}
    for key, text in options.items():
        if key not in NEXMARK_OPTIONS:
            continue
        parse, field = NEXMARK_OPTIONS[key]
        try:
            parsed[key] = parse(text)
        except ValueError as e:
            raise ValidationError(
                f"Invalid value for option '{key}' of table '{name}': {text!r} ({e})"
            ) from None
        if field is not None:
            values[field] = parsed[key]
    if parsed.get("keep-alive"):
        raise ValidationError(
            f"Table '{name}': 'keep-alive' = 'true' is not supported by Cairn's nexmark"
            " connector (a bounded source ends when its events are emitted)"
        )
    events = values.get("events_num", 0)
    if events < 0:
        raise ValidationError(f"Table '{name}': 'events.num' must be >= 0, got {events}")
    limit = events if events > 0 else None  # 0: unbounded, as in nexmark-flink
    stop = parsed.get("stop-at", -1)
    if stop >= 0:
        limit = stop if limit is None else min(limit, stop)
    values["events_num"] = limit
    try:
        return NexmarkConfig(**values)
    except ValueError as e:
        raise ValidationError(f"Table '{name}': {e}") from None


def _check_shape(name: str, columns: Columns) -> None:
    types = columns.types
    shape = [
        0 if not isinstance(t, RowType) else len(t.field_names()) for t in types
    ]  # 0: not a row
    expected = [width for _, width in _SHAPE]
    if len(types) != 4 or shape != expected or types[0].root != "INT":
        layout = ", ".join(
            f"{column} ROW<{len(NEXMARK_ROW_FIELDS[column][0])} fields>" for column, _ in _SHAPE[1:]
        )
        raise ValidationError(
            f"Table '{name}' of connector 'nexmark' must have the physical columns"
            f" event_type INT, {layout} (nexmark-flink's layout), got: "
            + ", ".join(f"{c.name} {c.data_type}" for c in columns.columns)
        )


def nexmark_scan(name: str, columns: Columns, options: Mapping[str, str]) -> StreamScan:
    """The scan of a nexmark table (options already checked against ``nexmark_options``)."""
    _check_shape(name, columns)
    config = nexmark_config(name, options)
    path = f"default_catalog.default_database.{name}"

    def build(env: StreamExecutionEnvironment) -> DataStream:
        source = nexmark_source(config, record_kind=0)
        stream = env.from_source(source, WatermarkStrategy.no_watermarks(), f"Source: {name}")
        scanned: DataStream = stream.uid(f"table-source-{path}")
        return scanned

    return StreamScan(columns, path, reused(build))
