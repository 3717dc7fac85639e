"""``SHOW ...`` and ``DESCRIBE``: the catalog's contents as Flink's result rows.

Invariant: read-only — a ``SHOW`` never changes the catalog; each statement gives Flink's
column names and, where it lists names, sorts them and keeps those its ``[NOT] LIKE`` pattern
matches (``%`` any run, ``_`` one character; ``ILIKE`` ignores case). Cairn has one
in-memory catalog, ``default_catalog`` with ``default_database``, and the module ``core``;
a name in another catalog or database is refused naming it.

>>> matches_like("orders", "%der_", ilike=False), matches_like("Orders", "o%", ilike=True)
(True, True)
>>> print(flink_expression("ts - interval '1' seconds"))
`ts` - INTERVAL '1' SECOND
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from sqlglot.tokenizer_core import TokenType

from cairn.table.analysis import Columns
from cairn.table.schema import PARTITION_KEYS_OPTION, Schema, UnresolvedColumn, partition_keys
from cairn.table.sql.client_parse import ClientStatement
from cairn.table.sql.dialect import Flink
from cairn.table.sql.errors import SqlValidationError, position_of
from cairn.table.sql.relation_names import DEFAULT_PATH
from cairn.table.table import Table
from cairn.table.types import DataType, DataTypes

__all__ = [
    "ShowCatalog",
    "builtin_function_names",
    "describe_rows",
    "flink_expression",
    "matches_like",
    "show",
]

_CATALOG, _DATABASE = DEFAULT_PATH
_DESCRIBE = ["name", "type", "null", "key", "extras", "watermark"]
_UNITS = {"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "TO"}
#: SQL calls with syntax or planning of their own, beside the registry's scalar functions.
_SPECIAL_CALLS = ("CAST", "TRY_CAST", "ROW_NUMBER", "TUMBLE", "HOP", "CUMULATE", "SESSION",
                  "GROUPING", "GROUPING_ID", "JSON_VALUE", "JSON_QUERY", "JSON_EXISTS",
                  "JSON_ARRAY", "JSON_OBJECT", "TRIM", "EXTRACT", "POSITION", "SUBSTRING",
                  "OVERLAY", "FLOOR", "CEIL")  # fmt: skip


class ShowCatalog(Protocol):
    """What ``SHOW`` reads of the table environment."""

    def list_tables(self) -> list[str]: ...

    def list_views(self) -> list[str]: ...

    def has_table(self, name: str) -> bool: ...

    def is_view(self, name: str) -> bool: ...

    def lookup_table(self, name: str) -> Table | None: ...

    def declared_schema(self, name: str) -> Schema | None: ...

    def table_options(self, name: str) -> dict[str, str] | None: ...

    def definition_of(self, name: str) -> str | None: ...

    def list_user_defined_functions(self) -> list[str]: ...

    def list_jobs(self) -> list[tuple[str, str, str, str]]: ...


Result = tuple[Columns, list[tuple[Any, ...]]]


def matches_like(name: str, pattern: str, ilike: bool) -> bool:
    """Whether ``name`` matches the SQL ``LIKE`` ``pattern``."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.IGNORECASE | re.DOTALL if ilike else re.DOTALL) is not None


def builtin_function_names(calls: Sequence[str]) -> list[str]:
    """Every built-in function SQL can call (``calls``: the registry's and the converter's
    names), lower case and sorted as ``SHOW FUNCTIONS`` lists them."""
    return sorted({n.lower() for n in (*calls, *_SPECIAL_CALLS) if re.fullmatch(r"\w+", n)})


def flink_expression(text: str) -> str:
    """An expression's text as Flink prints it in ``SHOW CREATE TABLE``: names in backquotes,
    functions and keywords in upper case, plural interval units singular."""
    tokens = Flink().tokenize(text)
    out: list[str] = []
    at = 0
    for i, token in enumerate(tokens):
        out.append(text[at : token.start])
        source = text[token.start : token.end + 1]
        at = token.end + 1
        following = tokens[i + 1].token_type if i + 1 < len(tokens) else None
        word = source.upper()
        if token.token_type == TokenType.VAR and following != TokenType.L_PAREN:
            singular = word[:-1] if word.endswith("S") and word[:-1] in _UNITS else word
            out.append(singular if singular in _UNITS else f"`{token.text}`")
        elif token.token_type != TokenType.STRING and re.fullmatch(r"[A-Za-z_]\w*", source):
            out.append(word)
        else:
            out.append(source)
    return "".join(out) + text[at:]


def describe_rows(catalog: ShowCatalog, name: str) -> list[tuple[str, ...]] | None:
    """``DESCRIBE name``'s rows (Flink's columns: name, type, null, key, extras, watermark),
    None when there is no such table or view."""
    table = catalog.lookup_table(name)
    schema = catalog.declared_schema(name)
    if table is None and schema is None:
        return None
    columns = table.get_schema() if table is not None else schema.persisted_columns()  # type: ignore[union-attr]
    key = schema.primary_key if schema is not None else ()
    watermark = schema.watermark if schema is not None else None
    extras = {c.name: _extras(c) for c in schema.columns} if schema is not None else {}
    rows: list[tuple[str, ...]] = []
    for c in columns.columns:
        rowtime = watermark is not None and watermark[0] == c.name
        rows.append(
            (
                c.name,
                str(c.data_type.nullable_()) + (" *ROWTIME*" if rowtime else ""),
                "TRUE" if c.data_type.nullable else "FALSE",
                f"PRI({', '.join(key)})" if c.name in key else "",
                extras.get(c.name) or "",
                watermark[1] if rowtime and watermark is not None else "",
            )
        )
    return rows


def _extras(column: UnresolvedColumn) -> str | None:
    """``DESCRIBE``'s extras: ``AS expr`` of a computed column, ``METADATA FROM 'key'
    VIRTUAL`` of a metadata column."""
    if column.expression is not None:
        return f"AS {column.expression}"
    return column.metadata_text() if column.is_metadata else None


def show(
    catalog: ShowCatalog, statement: ClientStatement, sql: str, functions: list[str]
) -> Result:
    """The columns and rows of one ``SHOW`` statement (``functions``: the built-in names)."""
    verb = statement.verb
    if verb == "SHOW CURRENT CATALOG":
        return _strings(["current catalog name"], [(_CATALOG,)])
    if verb == "SHOW CURRENT DATABASE":
        return _strings(["current database name"], [(_DATABASE,)])
    if verb == "SHOW JOBS":
        return _strings(["job id", "job name", "status", "start time"], catalog.list_jobs())
    if verb == "SHOW MODULES":
        return _strings(["module name"], [("core",)])
    if verb == "SHOW FULL MODULES":
        return Columns.of([("module name", DataTypes.STRING()), ("used", DataTypes.BOOLEAN())]), [
            ("core", True)
        ]
    if verb in ("SHOW CREATE TABLE", "SHOW CREATE VIEW"):
        name = _object(catalog, statement, sql)
        text = _create_view(catalog, name, statement, sql) if verb.endswith("VIEW") else None
        return _strings(["result"], [(text or _create_table(catalog, name, statement, sql),)])
    if verb == "SHOW COLUMNS":
        name = _object(catalog, statement, sql)
        rows = describe_rows(catalog, name) or []
        return _strings(_DESCRIBE, [r for r in rows if _kept(statement, r[0])])
    if verb == "SHOW CATALOGS":
        column, names = "catalog name", [_CATALOG]
    elif verb == "SHOW DATABASES":
        _in(statement, sql, _CATALOG)
        column, names = "database name", [_DATABASE]
    elif verb in ("SHOW TABLES", "SHOW VIEWS"):
        _in(statement, sql, _DATABASE)
        listed = catalog.list_tables() if verb == "SHOW TABLES" else catalog.list_views()
        column = "table name" if verb == "SHOW TABLES" else "view name"
        names = [n for n in listed if not n.startswith("UnnamedTable$")]
    else:  # SHOW [USER] FUNCTIONS
        _in(statement, sql, _DATABASE)
        user = catalog.list_user_defined_functions()
        column, names = "function name", sorted(set(user if "USER" in verb else user + functions))
    return _strings([column], [(n,) for n in names if _kept(statement, n)])


def _strings(names: list[str], rows: Sequence[tuple[Any, ...]]) -> Result:
    return Columns.of([(n, DataTypes.STRING()) for n in names]), list(rows)


def _kept(statement: ClientStatement, name: str) -> bool:
    if statement.like is None:
        return True
    return matches_like(name, statement.like, statement.ilike) != statement.not_like


def _error(sql: str, offset: int, message: str) -> SqlValidationError:
    line, column = position_of(sql, offset)
    return SqlValidationError(message, line, column)


def _in(statement: ClientStatement, sql: str, expected: str) -> None:
    """``FROM [catalog.]database`` / ``FROM catalog`` names Cairn's only ones."""
    if not statement.names:
        return
    wanted = DEFAULT_PATH if expected == _DATABASE else (_CATALOG,)
    given = tuple(n for n, _ in statement.names)
    if given != wanted[-len(given) :]:
        what = "Database" if expected == _DATABASE else "Catalog"
        raise _error(
            sql,
            statement.names[0][1],
            f"{what} {'.'.join(given)} does not exist: Cairn has one catalog,"
            f" {_CATALOG}.{_DATABASE}",
        )


def _object(catalog: ShowCatalog, statement: ClientStatement, sql: str) -> str:
    """The table or view ``statement`` names, checked to exist."""
    given = tuple(n for n, _ in statement.names)
    name = given[-1]
    if len(given) > 3 or (len(given) > 1 and given[:-1] != DEFAULT_PATH[-(len(given) - 1) :]):
        name = ".".join(given)
    if not catalog.has_table(name) and catalog.declared_schema(name) is None:
        what = "Table or view" if statement.verb == "SHOW COLUMNS" else "Table"
        path = f"{_CATALOG}.{_DATABASE}.{name}" if len(given) == 1 else ".".join(given)
        raise _error(sql, statement.names[0][1], f"{what} with identifier '{path}' does not exist.")
    return name


def _path(name: str) -> str:
    return f"`{_CATALOG}`.`{_DATABASE}`.`{name}`"


def _temporary(catalog: ShowCatalog, name: str) -> bool:
    """Created ``TEMPORARY`` (or by the Table API, whose tables and views are temporary)."""
    definition = catalog.definition_of(name)
    return definition is None or re.match(r"\s*CREATE\s+TEMPORARY\b", definition, re.I) is not None


def _create_table(catalog: ShowCatalog, name: str, statement: ClientStatement, sql: str) -> str:
    schema = catalog.declared_schema(name)
    options = catalog.table_options(name)
    if schema is None or options is None:
        raise _error(
            sql,
            statement.start,
            f"SHOW CREATE TABLE is only supported for tables, but {_path(name)} is a view."
            " Please use SHOW CREATE VIEW instead.",
        )
    lines = []
    for c in schema.columns:
        if c.expression is not None:
            lines.append(f"`{c.name}` AS {flink_expression(c.expression)}")
        elif c.is_metadata:
            lines.append(f"`{c.name}` {_type(c.data_type)} {c.metadata_text()}")
        else:
            lines.append(f"`{c.name}` {_type(c.data_type)}")
    if schema.watermark is not None:
        column, expression = schema.watermark
        lines.append(f"WATERMARK FOR `{column}` AS {flink_expression(expression)}")
    if schema.primary_key:
        keys = ", ".join(f"`{k}`" for k in schema.primary_key)
        lines.append(
            f"CONSTRAINT `PK_{'_'.join(schema.primary_key)}` PRIMARY KEY ({keys}) NOT ENFORCED"
        )
    partitions = partition_keys(options)
    head = f"CREATE {'TEMPORARY ' if _temporary(catalog, name) else ''}TABLE {_path(name)} (\n"
    text = head + ",\n".join(f"  {line}" for line in lines) + "\n)"
    if partitions:
        text += f"\nPARTITIONED BY ({', '.join(f'`{k}`' for k in partitions)})\n"
    else:
        text += " "
    with_options = [(k, v) for k, v in options.items() if k != PARTITION_KEYS_OPTION]
    body = ",\n".join(f"  '{_quoted(k)}' = '{_quoted(v)}'" for k, v in with_options)
    return text + f"WITH (\n{body}\n)\n"


def _create_view(
    catalog: ShowCatalog, name: str, statement: ClientStatement, sql: str
) -> str | None:
    if not catalog.is_view(name):
        raise _error(
            sql,
            statement.start,
            f"SHOW CREATE VIEW is only supported for views, but {_path(name)} is a table."
            " Please use SHOW CREATE TABLE instead.",
        )
    definition = catalog.definition_of(name)
    query = _view_query(definition) if definition is not None else None
    table = catalog.lookup_table(name)
    if query is None or table is None:
        raise _error(
            sql,
            statement.names[0][1],
            f"View {_path(name)} was made by the Table API: Cairn keeps no SQL text of it",
        )
    columns = ",\n".join(f"  `{n}`" for n in table.get_schema().names)
    kind = "TEMPORARY " if _temporary(catalog, name) else ""
    return f"CREATE {kind}VIEW {_path(name)} (\n{columns}\n)\nAS {query}\n"


def _view_query(definition: str) -> str | None:
    """The query of ``CREATE [TEMPORARY] VIEW [IF NOT EXISTS] name [(cols)] AS query``."""
    tokens = Flink().tokenize(definition)
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.ALIAS and i + 1 < len(tokens):
            return definition[tokens[i + 1].start :].strip().rstrip(";").strip()
    return None


def _type(data_type: DataType | None) -> str:
    """A type as Flink's ``SHOW CREATE TABLE`` writes it (``STRING`` is ``VARCHAR(max)``)."""
    text = str(data_type)
    text = re.sub(r"\bSTRING\b", "VARCHAR(2147483647)", text)
    return re.sub(r"\bBYTES\b", "VARBINARY(2147483647)", text)


def _quoted(text: str) -> str:
    return text.replace("'", "''")
