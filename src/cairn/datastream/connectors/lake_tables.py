"""One address for a lakehouse table, Delta or Iceberg, for maintenance: compaction
(``optimize_table``) and the doctor's facts (``table_facts``), as ``cairn table optimize`` and
``cairn doctor --table`` use them.

Invariant: a table is named the way its sink names it — a Delta table by its path or URL
(``/data/words``, ``s3://lake/words``), an Iceberg table by ``namespace.table`` in the catalog
whose pyiceberg properties are given (``uri``, ``warehouse``, ``s3.*``); for a Delta table the
properties are delta-rs's storage options. The choice is :func:`table_format`, pure.

>>> table_format("/tmp/words"), table_format("s3://lake/words"), table_format("shop.orders")
('delta', 'delta', 'iceberg')
"""

from __future__ import annotations

from collections.abc import Mapping

from cairn.datastream.connectors.small_files import MIN_INPUT_FILES, CompactionResult
from cairn.observability.doctor.table_rules import LakeTableFacts

__all__ = ["optimize_table", "table_facts", "table_format"]


def table_format(table: str) -> str:
    """``delta`` for a path or URL, ``iceberg`` for ``namespace.table``.

    >>> table_format("orders")
    Traceback (most recent call last):
    ...
    ValueError: 'orders' is neither a Delta table's path or URL nor an Iceberg 'namespace.table'
    """
    if "/" in table or "://" in table or table.startswith("."):
        return "delta"
    if "." in table.strip(".") and " " not in table:
        return "iceberg"
    raise ValueError(
        f"{table!r} is neither a Delta table's path or URL nor an Iceberg 'namespace.table'"
    )


def optimize_table(
    table: str,
    properties: Mapping[str, str] | None = None,
    *,
    target_file_size: int | None = None,
    min_input_files: int = MIN_INPUT_FILES,
    vacuum_retention_hours: int | None = None,
    catalog_name: str = "cairn",
) -> CompactionResult:
    """Compact a Delta or Iceberg table's small files in one commit, safe beside a job that
    writes it exactly once (Delta: delta-rs's ``OPTIMIZE``, then ``vacuum`` with
    ``vacuum_retention_hours``; Iceberg: a ``replace`` snapshot that rewrites the partitions
    with at least ``min_input_files`` small files). ``target_file_size``: default the
    table's ``delta.targetFileSize`` / ``write.target-file-size-bytes``.

    >>> optimize_table("shop.orders", {}, vacuum_retention_hours=1)
    Traceback (most recent call last):
    ...
    ValueError: vacuum is Delta's; an Iceberg table's old files go with expire_snapshots
    """
    props = dict(properties or {})
    if table_format(table) == "delta":
        from cairn.datastream.connectors.delta_maintenance import optimize_delta

        return optimize_delta(
            table,
            target_size=target_file_size,
            vacuum_retention_hours=vacuum_retention_hours,
            storage_options=props,
        )
    if vacuum_retention_hours is not None:
        raise ValueError("vacuum is Delta's; an Iceberg table's old files go with expire_snapshots")
    if "uri" not in props:
        raise ValueError(f"Iceberg table {table}: give the catalog's properties (uri=...)")
    from cairn.datastream.connectors.iceberg_maintenance import rewrite_data_files

    return rewrite_data_files(
        table,
        props,
        target_file_size_bytes=target_file_size,
        min_input_files=min_input_files,
        catalog_name=catalog_name,
    )


def table_facts(
    table: str, properties: Mapping[str, str] | None = None, catalog_name: str = "cairn"
) -> LakeTableFacts:
    """The doctor's facts of a Delta or Iceberg table (its data files and latest commits)."""
    props = dict(properties or {})
    if table_format(table) == "delta":
        from cairn.datastream.connectors.delta_maintenance import delta_table_facts

        return delta_table_facts(table, props)
    if "uri" not in props:
        raise ValueError(f"Iceberg table {table}: give the catalog's properties (uri=...)")
    from cairn.datastream.connectors.iceberg_maintenance import iceberg_table_facts

    return iceberg_table_facts(table, props, catalog_name)
