"""``CREATE TABLE t [(columns, WATERMARK ..., PRIMARY KEY ...)] WITH (...) LIKE base
[(INCLUDING | EXCLUDING | OVERWRITING feature, ...)]``: a table declared from another one's
schema and options, with Flink's merging rules.

Invariant: pure. The base's physical columns always come first, then the new table's own; a
name declared twice is refused. Each feature — ``CONSTRAINTS`` (the primary key),
``GENERATED`` (computed columns), ``METADATA`` (metadata columns), ``OPTIONS``,
``PARTITIONS``, ``WATERMARKS`` — is merged by its strategy: ``INCLUDING`` takes the base's
and the new table's (two of a kind — a watermark on the same column, the same option key,
two primary keys — are refused, naming what to write instead), ``OVERWRITING`` takes the
base's but lets the new table's win, ``EXCLUDING`` drops the base's. ``ALL`` sets every
feature. Flink's default is ``INCLUDING ALL OVERWRITING OPTIONS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sqlglot import exp

from cairn.table.errors import ValidationError
from cairn.table.schema import PARTITION_KEYS_OPTION, Schema

__all__ = ["DEFAULT_MODES", "like_modes", "merge_like"]

FEATURES = ("CONSTRAINTS", "GENERATED", "METADATA", "OPTIONS", "PARTITIONS", "WATERMARKS")
DEFAULT_MODES = {f: "INCLUDING" for f in FEATURES} | {"OPTIONS": "OVERWRITING"}
_STRATEGIES = ("INCLUDING", "EXCLUDING", "OVERWRITING")


def like_modes(like: exp.Expr) -> dict[str, str]:
    """The strategy of each feature ``LIKE base (...)`` states, over Flink's defaults."""
    modes = dict(DEFAULT_MODES)
    items = like.this.expressions if isinstance(like.this, exp.Schema) else []
    for item in items:
        strategy = item.name.upper()
        kind = item.args.get("kind")
        feature = str(kind.this if isinstance(kind, exp.Literal) else kind or "").upper()
        if strategy not in _STRATEGIES or feature not in (*FEATURES, "ALL"):
            raise ValidationError(
                f"LIKE takes (INCLUDING | EXCLUDING | OVERWRITING) (ALL | {' | '.join(FEATURES)}),"
                f" got {item.sql()}"
            )
        if feature == "ALL":
            if strategy == "OVERWRITING":
                raise ValidationError("OVERWRITING ALL is not allowed: use INCLUDING ALL")
            modes = {f: strategy for f in FEATURES}
        else:
            modes[feature] = strategy
    return modes


def merge_like(
    base: Schema,
    base_options: Mapping[str, str],
    own: Schema,
    own_options: Mapping[str, str],
    modes: Mapping[str, str],
) -> tuple[Schema, dict[str, str]]:
    """The new table's schema and options (see the module's invariant)."""
    kept = [
        c
        for c in base.columns
        if c.is_physical
        or (c.expression is not None and modes["GENERATED"] != "EXCLUDING")
        or (c.is_metadata and modes["METADATA"] != "EXCLUDING")
    ]
    names = {c.name for c in kept}
    columns = list(kept)
    for c in own.columns:
        if c.name in names:
            overwritable = c.expression is not None and modes["GENERATED"] == "OVERWRITING"
            overwritable |= c.is_metadata and modes["METADATA"] == "OVERWRITING"
            if not overwritable:
                raise ValidationError(f"A column named '{c.name}' already exists in the base table")
            columns = [c if x.name == c.name else x for x in columns]
            continue
        columns.append(c)
    watermark = base.watermark if modes["WATERMARKS"] != "EXCLUDING" else None
    if own.watermark is not None:
        if watermark is not None and modes["WATERMARKS"] == "INCLUDING":
            raise ValidationError(
                f"There already exists a watermark spec for column '{watermark[0]}' in the base"
                " table. You might want to specify EXCLUDING WATERMARKS or OVERWRITING"
                " WATERMARKS."
            )
        watermark = own.watermark
    key = base.primary_key if modes["CONSTRAINTS"] != "EXCLUDING" else ()
    if own.primary_key:
        if key and modes["CONSTRAINTS"] == "INCLUDING":
            raise ValidationError(
                "The base table already has a primary key. You might want to specify"
                " EXCLUDING CONSTRAINTS."
            )
        key = own.primary_key
    options = _merged_options(base_options, own_options, modes)
    return replace(own, columns=tuple(columns), watermark=watermark, primary_key=key), options


def _merged_options(
    base: Mapping[str, str], own: Mapping[str, str], modes: Mapping[str, str]
) -> dict[str, str]:
    out: dict[str, str] = {}
    partitions = base.get(PARTITION_KEYS_OPTION)
    if partitions is not None and modes["PARTITIONS"] != "EXCLUDING":
        out[PARTITION_KEYS_OPTION] = partitions
    if modes["OPTIONS"] != "EXCLUDING":
        out.update({k: v for k, v in base.items() if k != PARTITION_KEYS_OPTION})
    for k, v in own.items():
        if k == PARTITION_KEYS_OPTION:
            if PARTITION_KEYS_OPTION in out and modes["PARTITIONS"] == "INCLUDING":
                raise ValidationError(
                    "The base table already has partitions. You might want to specify"
                    " EXCLUDING PARTITIONS."
                )
        elif k in out and modes["OPTIONS"] == "INCLUDING" and out[k] != v:
            raise ValidationError(
                f"There already exists an option ['{k}' -> '{out[k]}'] in the base table."
                " You might want to specify EXCLUDING OPTIONS or OVERWRITING OPTIONS."
            )
        out[k] = v
    return out
