"""``cairn table optimize TABLE``: compact a lakehouse table's small files in one commit, safe
beside a job writing it (``lake_tables.optimize_table``); and the doctor's findings on tables
(``cairn doctor --table``).

Invariant: the command only calls the public maintenance API and prints its one-line result
(or JSON); a table is named as its sink names it (a Delta path or URL, an Iceberg
``namespace.table`` with its catalog properties as ``-D key=value``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from cairn.cli.options import parse_conf_items

__all__ = ["add_table_command", "cmd_table_optimize", "table_findings"]


def table_findings(tables: Sequence[str], properties: Mapping[str, str]) -> list[dict[str, Any]]:
    """The doctor's findings (as dicts) on each table's data files."""
    from cairn.datastream.connectors.lake_tables import table_facts
    from cairn.observability.doctor.table_rules import small_files

    findings = []
    for table in tables:
        finding = small_files(table_facts(table, properties))
        if finding is not None:
            findings.append(finding.to_dict())
    return findings


def cmd_table_optimize(args: argparse.Namespace) -> int:
    from cairn.common.exceptions import ConfigurationError
    from cairn.datastream.connectors.lake_tables import optimize_table

    try:
        result = optimize_table(
            args.table,
            parse_conf_items(args.conf),
            target_file_size=args.target_file_size,
            min_input_files=args.min_input_files,
            vacuum_retention_hours=args.vacuum_retention_hours,
        )
    except ValueError as e:
        raise ConfigurationError(str(e)) from e
    print(json.dumps(asdict(result)) if args.json else result.describe())
    return 0


def add_table_command(sub: Any) -> None:
    """Register ``cairn table optimize`` on the ``cairn`` parser's subcommands."""
    table = sub.add_parser("table", help="maintain a lakehouse table (Delta, Iceberg)")
    actions = table.add_subparsers(dest="action", required=True)
    opt = actions.add_parser(
        "optimize",
        help="compact small data files into files of the target size, in one commit "
        "(safe while a job writes the table)",
    )
    opt.add_argument("table", help="a Delta table's path or URL, or an Iceberg 'namespace.table'")
    opt.add_argument(
        "-D",
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="Iceberg catalog properties (uri=..., warehouse=..., s3.*) or Delta storage "
        "options (AWS_ENDPOINT_URL=...)",
    )
    opt.add_argument(
        "--target-file-size",
        type=int,
        default=None,
        metavar="BYTES",
        help="default: the table's write.target-file-size-bytes (Iceberg) or "
        "delta.targetFileSize (Delta)",
    )
    opt.add_argument(
        "--min-input-files",
        type=int,
        default=5,
        metavar="N",
        help="Iceberg: rewrite a partition with at least N small files (default 5)",
    )
    opt.add_argument(
        "--vacuum-retention-hours",
        type=int,
        default=None,
        metavar="H",
        help="Delta: then vacuum files removed over H hours ago (delta-rs refuses less than "
        "the table's delta.deletedFileRetentionDuration, a week)",
    )
    opt.add_argument("--json", action="store_true", help="the result as JSON")
    opt.set_defaults(func=cmd_table_optimize)
