"""``ROW_NUMBER()`` in SQL: the Top-N and deduplication queries Flink plans on a stream.

Invariant: ``ROW_NUMBER()`` is planned only in Flink's streaming pattern — a ``SELECT`` whose
``FROM`` is one subquery selecting ``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn``,
filtered by the enclosing ``WHERE`` to ranks up to a number (``rn <= N``, ``rn < N``,
``rn = N``, ``rn BETWEEN M AND N``, ANDed with any other condition). The rank conditions
become the node's rank range (``cairn.table.rank_planner``: ``Deduplicate`` or ``Rank``) and
leave the ``WHERE``; the rank number is computed only when the enclosing query reads ``rn``
(for a single rank, ``rn = N``, it is the constant ``N``, as Flink's
``RankNumberColumnRemoveRule`` makes it). Any other ``ROW_NUMBER()`` (and ``RANK()``,
``DENSE_RANK()``) is refused at its position: without the filter it is an over aggregate
Flink runs in batch mode only.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from cairn.table.errors import ValidationError
from cairn.table.expressions import col, lit
from cairn.table.plan import SortField
from cairn.table.rank_planner import rank_plan
from cairn.table.sql.errors import SqlErrors, SqlValidationError
from cairn.table.table import Table
from cairn.table.types import DataTypes

__all__ = ["RankedSource", "ranked_source", "refuse_ranking"]

_RANKING = ("ROW_NUMBER", "RANK", "DENSE_RANK", "PERCENT_RANK", "CUME_DIST", "NTILE")

RankedSource = tuple[exp.Select, exp.Subquery, Table]


def _ranking_call(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Anonymous | exp.Func):
        name = node.this.name.upper() if isinstance(node.this, exp.Anonymous) else ""
        name = name or type(node.this).__name__.upper().replace("ROWNUMBER", "ROW_NUMBER")
        return name if name in _RANKING else None
    return None


def refuse_ranking(select: exp.Select, errors: SqlErrors) -> None:
    """Refuses a ranking function left in ``select``'s list (one the Top-N pattern did not
    take)."""
    for item in select.expressions:
        for window in item.find_all(exp.Window):
            name = _ranking_call(window)
            if name == "ROW_NUMBER":
                raise errors.at(
                    window,
                    "ROW_NUMBER() on a stream is supported as Top-N or deduplication only:"
                    " SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY ... ORDER BY"
                    " ...) AS rn FROM t) WHERE rn <= N. Without that filter it is an over"
                    " aggregate Flink runs in batch mode only",
                )
            if name is not None:
                raise errors.at(
                    window,
                    f"{name}() is not supported on a streaming table: Flink's Top-N takes"
                    " ROW_NUMBER()",
                )


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _number(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit():
        return int(node.this)
    return None


def _bound(node: exp.Expr, name: str) -> tuple[int, int | None] | None:
    """The rank range a condition sets (its lower bound, its upper bound or None), or None
    when it is not a bound on column ``name`` by a number."""

    def is_rank(e: exp.Expr) -> bool:
        return isinstance(e, exp.Column) and e.name == name

    if isinstance(node, exp.Between) and is_rank(node.this):
        low, high = _number(node.args["low"]), _number(node.args["high"])
        return None if low is None or high is None else (low, high)
    flipped = {exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE, exp.EQ: exp.EQ}
    kind = type(node)
    if kind not in flipped:
        return None
    left, right = node.this, node.expression
    if is_rank(right) and not is_rank(left):
        left, right, kind = right, left, flipped[kind]
    value = _number(right)
    if not is_rank(left) or value is None:
        return None
    return {
        exp.EQ: (value, value),
        exp.LTE: (1, value),
        exp.LT: (1, value - 1),
        exp.GTE: (value, None),
        exp.GT: (value + 1, None),
    }[kind]


def ranked_source(
    outer: exp.Select, query: Callable[[exp.Expr], Table], errors: SqlErrors
) -> RankedSource | None:
    """When ``outer`` reads a subquery computing ``ROW_NUMBER()``: ``outer`` without its rank
    conditions, the subquery (in that copy) and the table that stands for it — the subquery's
    columns in its order, ``rn`` the rank number. ``query`` converts a query tree."""
    source = outer.args.get("from_") or outer.args.get("from")
    subquery = source.this if source is not None else None
    if outer.args.get("joins") or not isinstance(subquery, exp.Subquery):
        return None
    inner = subquery.this
    if not isinstance(inner, exp.Select):
        return None
    found = [
        i
        for i, item in enumerate(inner.expressions)
        if isinstance(item, exp.Alias) and _ranking_call(item.this) == "ROW_NUMBER"
    ]
    if len(found) != 1:
        return None  # none, or several: refused where the subquery is converted
    position = found[0]
    window = inner.expressions[position].this
    placed, names, at = _placed(inner, position, query)
    table_alias = subquery.args.get("alias")
    renamed = [c.name for c in table_alias.columns] if table_alias is not None else []
    rank_name = renamed[at] if at < len(renamed) else names[at]  # as the outer query sees it
    outer = outer.copy()
    where = outer.args.get("where")
    start, end, rest = 1, None, []
    for condition in _conjuncts(where.this) if where is not None else []:
        bound = _bound(condition, rank_name)
        if bound is None:
            rest.append(condition)
            continue
        start = max(start, bound[0])
        if bound[1] is not None:
            end = bound[1] if end is None else min(end, bound[1])
    if end is None:
        raise errors.at(
            window,
            f"ROW_NUMBER() on a stream needs the enclosing query to keep ranks up to a number"
            f" (WHERE {rank_name} <= N, {rank_name} = 1, {rank_name} BETWEEN M AND N): that is"
            " Top-N or deduplication. Without it, it is an over aggregate Flink runs in batch"
            " mode only",
        )
    outer.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    copied = outer.args.get("from_") or outer.args.get("from")
    assert copied is not None
    reads_rank = bool(renamed)  # renamed columns: all of them are there
    for key, value in outer.args.items():
        if key in ("from", "from_"):
            continue  # the subquery itself
        for part in value if isinstance(value, list) else [value]:
            if not isinstance(part, exp.Expr):
                continue
            for e in part.find_all(exp.Column, exp.Star):
                star = isinstance(e, exp.Star) or isinstance(e.this, exp.Star)
                reads_rank = reads_rank or star or e.name == rank_name
    table = _rank_table(placed, names, at, window, start, end, reads_rank, query, errors)
    return outer, copied.this, table


def _placed(
    inner: exp.Select, position: int, query: Callable[[exp.Expr], Table]
) -> tuple[exp.Select, list[str], int]:
    """``inner`` with a constant in place of its ``ROW_NUMBER()`` item, its column names, and
    the position of that item's column among them."""
    items = list(inner.expressions)
    placeholder = exp.alias_(exp.Literal.number(0), items[position].alias)
    placed = inner.copy()
    placed.set("expressions", [*items[:position], placeholder, *items[position + 1 :]])
    names = query(placed).get_schema().names
    before = items[:position]
    if any(isinstance(i, exp.Star) or isinstance(i.this, exp.Star) for i in before):
        prefix = inner.copy()
        prefix.set("expressions", before)
        return placed, names, len(query(prefix).get_schema().names)
    return placed, names, position


def _rank_table(
    with_placeholder: exp.Select,
    names: list[str],
    at: int,
    window: exp.Window,
    start: int,
    end: int,
    reads_rank: bool,
    query: Callable[[exp.Expr], Table],
    errors: SqlErrors,
) -> Table:
    """The subquery's table (``with_placeholder``: its rank column a constant, at ``at`` of
    ``names``): its columns with the rank number at its place."""
    rank_column = names[at]
    keys: list[str] = []
    order: list[tuple[str, bool, bool]] = []
    for key in window.args.get("partition_by") or []:
        if not isinstance(key, exp.Column):
            raise errors.at(key, "PARTITION BY of ROW_NUMBER() takes columns")
        keys.append(key.name)
    ordered = window.args.get("order")
    for o in ordered.expressions if ordered is not None else []:
        if not isinstance(o.this, exp.Column):
            raise errors.at(o, "ORDER BY of ROW_NUMBER() takes columns")
        order.append((o.this.name, not o.args.get("desc"), bool(o.args.get("nulls_first"))))
    if window.args.get("spec") is not None:
        raise errors.at(window, "ROW_NUMBER() takes no window frame (ROWS/RANGE)")
    # columns the window reads that the subquery does not select: selected hidden, dropped after
    visible = [n for i, n in enumerate(names) if i != at]
    hidden = [n for n in dict.fromkeys([*keys, *(o[0] for o in order)]) if n not in visible]
    if hidden:
        if with_placeholder.args.get("distinct") is not None:
            raise errors.at(window, "ROW_NUMBER() over SELECT DISTINCT takes selected columns")
        with_placeholder.set(
            "expressions", [*with_placeholder.expressions, *(exp.column(n) for n in hidden)]
        )
    selected = query(with_placeholder)
    all_names = selected.get_schema().names
    base_names = [n for i, n in enumerate(all_names) if i != at]
    base = selected.select(*(col(n) for n in base_names))
    output_rank = reads_rank and start != end
    try:
        node = rank_plan(
            base.plan,
            [base_names.index(k) for k in keys],
            [SortField(base_names.index(n), asc, nf) for n, asc, nf in order],
            start,
            end,
            output_rank,
            rank_column,
        )
    except SqlValidationError:
        raise
    except ValidationError as error:
        raise errors.at(window, str(error)) from None
    ranked = Table(node, base.context)
    if not reads_rank:  # nobody reads rn: the subquery's other columns only
        return ranked.select(*(col(n) for i, n in enumerate(names) if i != at))
    rank_value = col(rank_column) if output_rank else lit(start).cast(DataTypes.BIGINT(False))
    return ranked.select(*(rank_value.alias(n) if i == at else col(n) for i, n in enumerate(names)))
