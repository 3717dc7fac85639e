"""``pyflink.table`` has no counterpart in Cairn: importing a name from it fails, naming it.

Invariant: Cairn runs DataStream jobs only; this package holds nothing, and every class name
asked of it (``from cairn.table import StreamTableEnvironment``) raises ``ImportError`` saying
so, at import time, before a job is built. A PyFlink job that goes through the Table API (a
``datagen`` or ``filesystem`` table as source, ``t_env.to_data_stream``...) must build its
source with the DataStream API instead; ``Row`` is ``cairn.common.Row``.

>>> try:
...     from cairn.table import StreamTableEnvironment
... except ImportError as e:
...     print(str(e).split(":")[0])
cairn.table.StreamTableEnvironment
"""

from __future__ import annotations

__all__: list[str] = []


def __getattr__(name: str) -> object:
    if not name[:1].isupper():  # tools probe modules (pytest_plugins, __wrapped__...)
        raise AttributeError(f"module 'cairn.table' has no attribute {name!r}")
    raise ImportError(
        f"cairn.table.{name}: Cairn has no Table API or SQL (PyFlink's pyflink.table); it runs"
        " DataStream jobs only. Build the job with cairn.datastream (Row is cairn.common.Row);"
        " see the README's 'DataStream API support'."
    )
