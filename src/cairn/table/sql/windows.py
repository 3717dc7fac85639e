"""The time windows of a ``SELECT``: its one OVER window, and its group window (a window
TVF's or a legacy ``GROUP BY TUMBLE(...)``), as the Table API's ``OverWindow`` and
``GroupWindow`` that ``time_planner.over_aggregate`` and ``time_planner.window_aggregate`` take.

Invariant: a query has at most one of each, and every call that names one (``OVER (...)``,
``OVER w``, ``TUMBLE_START(...)``, ``window_start``) must name the same window, else the call
is refused at its position; the group window is named ``w$``, as Flink's SQL names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from cairn.table.errors import ValidationError
from cairn.table.expressions import (
    UNBOUNDED_RANGE,
    UNBOUNDED_ROW,
    Expression,
    col,
    lit,
    row_interval,
)
from cairn.table.sql.errors import SqlErrors
from cairn.table.sql.expressions import ExpressionConverter
from cairn.table.table import Table
from cairn.table.window import GroupWindow, Over, OverWindow, Session, Slide, Tumble

__all__ = [
    "WINDOW",
    "GroupWindows",
    "OverWindows",
    "WindowTvf",
    "check_session_keys",
    "groups_by_window",
]


class OverWindows:
    """The one over window of a query: every ``OVER (...)`` and ``OVER w`` must name the same
    window, as Flink's streaming over aggregate requires; it becomes an ``OverWindow``."""

    ALIAS = "w"

    def __init__(self, errors: SqlErrors, named: list[exp.Window], columns: list[str]) -> None:
        self.errors = errors
        self.columns = columns
        self.named = {w.name: w for w in named}
        self.window: OverWindow | None = None

    def alias_of(self, node: exp.Window) -> str:
        spec: exp.Expr = node
        reference = node.args.get("alias")
        if reference is not None and not node.args.get("order"):
            found = self.named.get(reference.name)
            if found is None:
                raise self.errors.at(node, f"Window '{reference.name}' not found")
            spec = found
        window = self._window(node, spec)
        if self.window is not None and window != self.window:
            raise self.errors.at(
                node,
                "All OVER aggregates of a query must use the same window (Flink streaming"
                " supports one over window per SELECT)",
            )
        self.window = window
        return self.ALIAS

    def _window(self, node: exp.Window, spec: exp.Expr) -> OverWindow:
        e = self.errors
        keys = []
        for key in spec.args.get("partition_by") or []:
            if not isinstance(key, exp.Column) or key.name not in self.columns:
                raise e.at(key, f"PARTITION BY takes columns of the input, got {key.sql()}")
            keys.append(col(key.name))
        order = spec.args.get("order")
        ordered = order.expressions if order is not None else []
        if len(ordered) != 1 or not isinstance(ordered[0].this, exp.Column):
            raise e.at(node, "An OVER window must be ordered by one time attribute (ORDER BY ts)")
        if ordered[0].args.get("desc"):
            raise e.at(ordered[0], "An OVER window is ordered ascending by its time attribute")
        window = Over.partition_by(*keys).order_by(col(ordered[0].this.name))
        frame = spec.args.get("spec")
        if frame is None:
            return window.alias(self.ALIAS)
        end = frame.args.get("end")
        if end is not None and str(end).upper() != "CURRENT ROW":
            place = end if isinstance(end, exp.Expr) else frame
            raise e.at(place, "An OVER window on a stream ends at CURRENT ROW")
        rows = str(frame.args.get("kind")).upper() == "ROWS"
        start = frame.args.get("start")
        bound: Expression
        if str(start).upper() == "UNBOUNDED":
            bound = UNBOUNDED_ROW if rows else UNBOUNDED_RANGE
        elif str(start).upper() == "CURRENT ROW":
            bound = row_interval(0) if rows else lit(0).milli
        elif rows and isinstance(start, exp.Literal) and not start.is_string:
            bound = row_interval(int(start.this))
        elif not rows and isinstance(start, exp.Interval):
            bound = ExpressionConverter(e, [], frozenset()).convert(start)
        else:
            kind = "ROWS takes n PRECEDING" if rows else "RANGE takes INTERVAL '...' unit PRECEDING"
            raise e.at(frame, f"Unsupported OVER frame: {kind} or UNBOUNDED PRECEDING")
        return self._build(frame, lambda: window.preceding(bound).alias(self.ALIAS))

    def _build(self, node: exp.Expr, step: Callable[[], OverWindow]) -> OverWindow:
        try:
            return step()
        except ValidationError as error:
            raise self.errors.at(node, str(error)) from None


WINDOW = "w$"
_TVF_COLUMNS = {"window_start": "start", "window_end": "end", "window_time": "rowtime"}
_GROUP_FUNCTIONS = {"TUMBLE": 2, "HOP": 3, "SESSION": 2}
_PROPERTY_SUFFIXES = {"_START": "start", "_END": "end", "_ROWTIME": "rowtime"}


@dataclass(frozen=True)
class WindowTvf:
    """A window TVF in ``FROM``: its window, its node, the table it windows, its ``PARTITION
    BY`` columns and the TVF's own table (``windowed``: the rows with their windows)."""

    window: GroupWindow
    node: exp.Expr
    table: Table
    partition_keys: tuple[str, ...]
    windowed: Table


def groups_by_window(select: exp.Select) -> bool:
    """Whether ``select`` groups by ``window_start`` and ``window_end`` (a window aggregate)."""
    group = select.args.get("group")
    keys = group.expressions if group is not None else []
    return {"window_start", "window_end"} <= {k.name for k in keys if isinstance(k, exp.Column)}


def check_session_keys(errors: SqlErrors, select: exp.Select, tvf: WindowTvf) -> None:
    """A session window aggregate groups by its ``PARTITION BY`` columns (sessions are per
    partition), no more, no fewer."""
    if tvf.window.kind != "session":
        return
    group = select.args["group"]
    keys = {
        k.name
        for k in group.expressions
        if not (isinstance(k, exp.Column) and k.name in _TVF_COLUMNS)
    }
    if keys != set(tvf.partition_keys):
        raise errors.at(
            group,
            "A SESSION window aggregate groups by the session's PARTITION BY columns:"
            f" {', '.join(sorted(tvf.partition_keys)) or 'none'}, got"
            f" {', '.join(sorted(keys)) or 'none'}",
            "GROUP",
        )


class GroupWindows:
    """The group window of one ``SELECT``, named ``w$`` as Flink's SQL names it: a window
    TVF's (its ``window_start``/``window_end``/``window_time`` columns are the window's
    properties), or the legacy ``GROUP BY TUMBLE(ts, size)`` with ``TUMBLE_START(...)``."""

    def __init__(self, errors: SqlErrors, tvf: tuple[GroupWindow, exp.Expr] | None) -> None:
        self.errors = errors
        self.tvf = tvf
        self.window: GroupWindow | None = tvf[0] if tvf is not None else None
        self.used: exp.Expr | None = None  # a legacy window call or property

    def convert(self, node: exp.Expr) -> Expression | None:
        if self.tvf is not None:
            if isinstance(node, exp.Column) and not node.table and node.name == WINDOW:
                return col(WINDOW)  # the window among the keys, in window_start's place
            if isinstance(node, exp.Column) and not node.table and node.name in _TVF_COLUMNS:
                prop: Expression = getattr(col(WINDOW), _TVF_COLUMNS[node.name])
                return prop
            return None
        if not isinstance(node, exp.Anonymous):
            return None
        name = node.name.upper()
        if name in _GROUP_FUNCTIONS:
            self._legacy(node, name)
            return col(WINDOW)
        for suffix, property_name in _PROPERTY_SUFFIXES.items():
            function = name.removesuffix(suffix)
            if name.endswith(suffix) and function in _GROUP_FUNCTIONS:
                self._legacy(node, function)
                self.used = self.used or node
                legacy_property: Expression = getattr(col(WINDOW), property_name)
                return legacy_property
        return None

    def before(self, node: exp.Expr) -> Expression | None:
        """In ``WHERE``, before the window exists: its properties are refused."""
        if self.convert(node) is not None:
            raise self.errors.at(
                node, f"{node.sql()} is a group window's property: it cannot be used in WHERE"
            )
        return None

    def _legacy(self, node: exp.Anonymous, name: str) -> None:
        e = self.errors
        args = list(node.expressions)
        if len(args) != _GROUP_FUNCTIONS[name] or not isinstance(args[0], exp.Column):
            usage = {"TUMBLE": "ts, size", "HOP": "ts, slide, size", "SESSION": "ts, gap"}
            raise e.at(node, f"{node.name} takes ({usage[name]})")
        intervals = ExpressionConverter(e, [], frozenset())
        sizes = [intervals.convert(a) for a in args[1:]]
        try:
            if name == "TUMBLE":
                window = Tumble.over(sizes[0])
            elif name == "HOP":
                window = Slide.over(sizes[1]).every(sizes[0])
            else:
                window = Session.with_gap(sizes[0])
            window = window.on(col(args[0].name)).alias(WINDOW)
        except ValidationError as error:
            raise e.at(node, str(error)) from None
        if self.window is not None and window != self.window:
            raise e.at(node, f"{node.name}(...) differs from the query's group window")
        self.window = window

    def keys(self, node: exp.Select, key_nodes: list[exp.Expr]) -> list[exp.Expr]:
        """The ``GROUP BY`` keys; of a window TVF: ``window_start`` and ``window_end`` (and
        ``window_time``) are the window, which stands in their place."""
        if self.tvf is None:
            return key_nodes
        window_keys = {
            k.name for k in key_nodes if isinstance(k, exp.Column) and k.name in _TVF_COLUMNS
        }
        if not {"window_start", "window_end"} <= window_keys:
            group = node.args.get("group")
            raise self.errors.at(
                group or self.tvf[1],
                "A window TVF is aggregated here: GROUP BY window_start, window_end, ..."
                " (window TopN, deduplication and joins are not built yet)",
                "GROUP" if group is not None else "",
            )
        rest = [k for k in key_nodes if not (isinstance(k, exp.Column) and k.name in _TVF_COLUMNS)]
        return [exp.column(WINDOW), *rest]

    def window_of(self, node: exp.Select, keys: list[Expression]) -> GroupWindow | None:
        """The window the ``SELECT`` groups by, checked against the keys."""
        if self.window is None:
            return None
        if not any(k.kind == "field" and k.name == WINDOW for k in keys):
            raise self.errors.at(
                self.used or node, "A group window property needs GROUP BY that window"
            )
        return self.window
