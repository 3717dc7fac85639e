"""PyFlink's Table API (``pyflink.table``) on Cairn's runtime: change the import and run.

Invariant: a table program is planned into a logical plan (``plan.py``) with Flink's
changelog semantics and translated onto Cairn's DataStream API (``translate.py``), so it has
Cairn's checkpoints, state backends, savepoints and Spark deployment; no JVM is involved. A
name of ``pyflink.table`` that Cairn does not have yet fails at import, naming it, before a
job is built.

>>> from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment
>>> from cairn.table.expressions import col
>>> t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
>>> t = t_env.from_elements([(1, "a"), (2, "b"), (3, "a")], ["id", "key"])
>>> print(t.group_by(col("key")).select(col("key"), col("id").sum.alias("total")).explain())
== Abstract Syntax Tree ==
GroupAggregate(groupBy=[key], select=[key, SUM(id) AS total]) changelogMode=[I,UB,UA,D]
+- Values(tuples=[3 rows], fields=[id, key]) changelogMode=[I]
<BLANKLINE>
== Optimized Logical Plan ==
GroupAggregate(groupBy=[key], select=[key, SUM(id) AS total]) changelogMode=[I,UB,UA,D]
+- Values(tuples=[3 rows], fields=[id, key]) changelogMode=[I]
<BLANKLINE>
"""

from __future__ import annotations

from cairn.common.types import Row, RowKind
from cairn.table.compiled_plan import CompiledPlan, PlanReference
from cairn.table.environment import (
    EnvironmentSettings,
    FormatDescriptor,
    StreamTableEnvironment,
    TableConfig,
    TableDescriptor,
    TableEnvironment,
)
from cairn.table.errors import TableException, ValidationError
from cairn.table.plan import ChangelogMode, ExplainDetail
from cairn.table.result import ResultKind, TableResult
from cairn.table.schema import Schema
from cairn.table.sql.errors import SqlParserError
from cairn.table.statement_set import StatementSet
from cairn.table.table import GroupedTable, Table
from cairn.table.types import DataTypes

__all__ = [
    "ChangelogMode",
    "CompiledPlan",
    "DataTypes",
    "EnvironmentSettings",
    "ExplainDetail",
    "FormatDescriptor",
    "GroupedTable",
    "PlanReference",
    "ResultKind",
    "Row",
    "RowKind",
    "Schema",
    "SqlParserError",
    "StatementSet",
    "StreamTableEnvironment",
    "Table",
    "TableConfig",
    "TableDescriptor",
    "TableEnvironment",
    "TableException",
    "TableResult",
    "ValidationError",
]


def __getattr__(name: str) -> object:
    if not name[:1].isupper():  # tools probe modules (pytest_plugins, __wrapped__...)
        raise AttributeError(f"module 'cairn.table' has no attribute {name!r}")
    raise ImportError(
        f"cairn.table.{name}: not in Cairn's Table API yet (it has {', '.join(__all__)});"
        " see docs/table-api.md for what is built"
    )
