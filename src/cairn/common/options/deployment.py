"""Deployment options: executor, Spark master, number of workers, progress, fault injection.

Invariant: every key here is registered on import.
"""

from __future__ import annotations

from cairn.common.options.define import at_least, define, non_empty, spellings

EXECUTOR = define(
    "cairn.executor",
    "enum",
    "spark",
    "spark (PySpark barrier tasks) or inprocess (threads).",
    choices=spellings(("spark",), ("inprocess", "in-process", "local")),
)
SPARK_MASTER = define(
    "cairn.spark.master",
    "str",
    None,
    "Spark master URL; default: the active session, else local[*].",
    check=non_empty,
)
PROGRESS = define("cairn.progress", "bool", False, "Print job progress to stderr.")
WORKERS = define(
    "cairn.workers",
    "int",
    None,
    "Number of workers (Spark barrier tasks); default: one per parallel subtask, "
    "bounded by the task slots Spark offers.",
    check=at_least(1, "the number of workers"),
)
TESTING_FAULTS = define(
    "cairn.testing.faults",
    "str",
    "",
    "Fault injection for recovery tests, e.g. "
    "'point=processing,attempt=0,records=5000;point=during-upload,attempt=1' "
    "(see cairn.runtime.faults).",
)
