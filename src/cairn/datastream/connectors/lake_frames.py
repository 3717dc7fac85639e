"""A lakehouse table's current snapshot as a Spark DataFrame, for the state processor's
bootstrap (``SavepointWriter.with_keyed_state(uid, descriptor, table_frame(spark, ...))``)
and for Spark SQL, while Spark's own Delta and Iceberg connectors do not load on the Spark
Cairn runs on.

Invariant: the DataFrame holds exactly the table's live rows at the version read. Spark's
Parquet reader reads the data files themselves (in parallel, nothing through the driver) only
when they are the rows — local files, no deletion vectors or delete files, no column mapping,
no partitions (Spark would take a `field=value/` folder for a column), an Iceberg schema
never evolved; otherwise the
table's own library (delta-rs, pyiceberg) reads the rows into Arrow on the driver and Spark
takes them from there. The choice is :func:`read_path`, pure.

>>> read_path(LakeFiles(("/wh/a.parquet", "file:///wh/b.parquet"), rows_elsewhere=False))
'parquet'
>>> read_path(LakeFiles(("s3://lake/a.parquet",), rows_elsewhere=False))
'arrow'
>>> read_path(LakeFiles(("/wh/a.parquet",), rows_elsewhere=True)), read_path(LakeFiles((), False))
('arrow', 'arrow')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.datastream.connectors.lake_tables import table_format

__all__ = ["LakeFiles", "read_path", "table_frame"]


@dataclass(frozen=True)
class LakeFiles:
    """A snapshot's data files, and whether its rows are more than those files' rows (deletes,
    renamed or mapped columns, partition values in paths Spark would read as columns)."""

    files: tuple[str, ...]
    rows_elsewhere: bool


def read_path(facts: LakeFiles) -> str:
    """``parquet`` when Spark may read the files as they are, else ``arrow``."""
    local = all(f.startswith(("/", "file:")) for f in facts.files)
    return "parquet" if facts.files and local and not facts.rows_elsewhere else "arrow"


def table_frame(
    spark: Any,
    table: str,
    properties: Mapping[str, str] | None = None,
    *,
    version: int | None = None,
    catalog_name: str = "cairn",
) -> Any:
    """The live rows of a Delta table (path or URL; ``properties``: delta-rs's storage
    options; ``version``: a Delta version) or an Iceberg table (``namespace.table``;
    ``properties``: the catalog's pyiceberg properties; ``version``: a snapshot id), as a
    Spark DataFrame with the table's column names.

    >>> table_frame(None, "shop.orders", {})
    Traceback (most recent call last):
    ...
    ValueError: Iceberg table shop.orders: give the catalog's properties (uri=...)
    """
    props = dict(properties or {})
    if table_format(table) == "delta":
        facts, arrow = _delta(table, props, version)
    else:
        if "uri" not in props:
            raise ValueError(f"Iceberg table {table}: give the catalog's properties (uri=...)")
        facts, arrow = _iceberg(table, props, version, catalog_name)
    if read_path(facts) == "parquet":
        return spark.read.parquet(*facts.files)
    return spark.createDataFrame(arrow())


def _delta(path: str, storage: dict[str, str], version: int | None) -> tuple[LakeFiles, Any]:
    import deltalake

    t = deltalake.DeltaTable(path, version=version, storage_options=storage or None)
    protocol, metadata = t.protocol(), t.metadata()
    features = set(protocol.reader_features or ())
    elsewhere = bool(
        features & {"deletionVectors", "columnMapping"}
        or metadata.partition_columns
        or metadata.configuration.get("delta.columnMapping.mode", "none") != "none"
    )
    return LakeFiles(tuple(t.file_uris()), elsewhere), t.to_pyarrow_table


def _iceberg(
    name: str, catalog: dict[str, str], snapshot_id: int | None, catalog_name: str
) -> tuple[LakeFiles, Any]:
    from pyiceberg.catalog import load_catalog

    catalog.setdefault("type", "sql")
    t = load_catalog(catalog_name, **catalog).load_table(name)
    scan = t.scan(snapshot_id=snapshot_id)
    tasks = list(scan.plan_files())
    elsewhere = (
        any(task.delete_files for task in tasks)
        or len(t.schemas()) > 1
        or not t.spec().is_unpartitioned()  # Spark would read `field=value/` paths as columns
    )
    return LakeFiles(tuple(task.file.file_path for task in tasks), elsewhere), scan.to_arrow
