"""``pyflink.table.window`` is not built yet: importing a name from it fails, naming it.

Invariant: holds nothing; every class or function asked of it raises ``ImportError`` at
import, before a job is built (see docs/table-api.md for what the Table API has).
"""

from __future__ import annotations

__all__: list[str] = []


def __getattr__(name: str) -> object:
    pyflink_names = {"udf", "udtf", "udaf", "udtaf"}
    if not name[:1].isupper() and name not in pyflink_names:  # tools probe modules
        raise AttributeError(f"module 'cairn.table.window' has no attribute {name!r}")
    raise ImportError(
        f"cairn.table.window.{name}: not in Cairn's Table API yet; see docs/table-api.md for what"
        " is built"
    )
