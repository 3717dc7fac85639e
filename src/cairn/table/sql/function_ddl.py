"""``CREATE [TEMPORARY] [SYSTEM] FUNCTION`` and ``DROP [TEMPORARY] [SYSTEM] FUNCTION``.

Invariant: pure reading of the statement's text (``parse_function_ddl``) — the object a
``CREATE`` names is imported by ``resolve_function`` only when the statement runs. Flink's
syntax is kept; ``LANGUAGE PYTHON`` is the only language (Cairn runs Python: ``JAVA`` and
``SCALA`` are refused naming the language), and the ``AS`` path names a module attribute
holding what ``udf``/``udtf``/``udaf`` return (or a class whose instance is one).

>>> parse_function_ddl("CREATE TEMPORARY SYSTEM FUNCTION IF NOT EXISTS f AS 'm.g' LANGUAGE PYTHON")
FunctionDdl(create=True, name='f', path='m.g', language='PYTHON', if_exists=True, temporary=True)
>>> parse_function_ddl("DROP FUNCTION IF EXISTS f").create, parse_function_ddl("SELECT 1")
(False, None)
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["FunctionDdl", "parse_function_ddl", "resolve_function"]

_NAME = r"(?P<name>`[^`]+`|[\w.$]+)"
_CREATE = re.compile(
    r"\s*CREATE\s+(?P<temporary>TEMPORARY\s+)?(?:SYSTEM\s+)?FUNCTION\s+"
    r"(?P<exists>IF\s+NOT\s+EXISTS\s+)?" + _NAME + r"\s+AS\s+'(?P<path>[^']*)'"
    r"(?:\s+LANGUAGE\s+(?P<language>\w+))?\s*;?\s*",
    re.I,
)
_DROP = re.compile(
    r"\s*DROP\s+(?P<temporary>TEMPORARY\s+)?(?:SYSTEM\s+)?FUNCTION\s+"
    r"(?P<exists>IF\s+EXISTS\s+)?" + _NAME + r"\s*;?\s*",
    re.I,
)


@dataclass(frozen=True)
class FunctionDdl:
    """One ``CREATE``/``DROP FUNCTION``: the function's (last) name, the ``AS`` path."""

    create: bool
    name: str
    path: str = ""
    language: str = "PYTHON"
    if_exists: bool = False
    temporary: bool = False


def parse_function_ddl(sql: str) -> FunctionDdl | None:
    """The function DDL ``sql`` is, or None for another statement."""
    for create, pattern in ((True, _CREATE), (False, _DROP)):
        found = pattern.fullmatch(sql)
        if found is not None:
            name = found.group("name").split(".")[-1].strip("`")
            return FunctionDdl(
                create,
                name,
                found.group("path") or "" if create else "",
                (found.group("language") or "PYTHON").upper() if create else "PYTHON",
                bool(found.group("exists")),
                bool(found.group("temporary")),
            )
    return None


def resolve_function(ddl: FunctionDdl) -> Any:
    """The function object ``ddl``'s path names; ``ValueError`` says why not."""
    if ddl.language != "PYTHON":
        raise ValueError(
            f"CREATE FUNCTION {ddl.name} ... LANGUAGE {ddl.language} is not supported:"
            " Cairn runs Python functions (LANGUAGE PYTHON, a module.attribute path)"
        )
    module_name, _, attribute = ddl.path.rpartition(".")
    if not module_name:
        raise ValueError(f"Function path '{ddl.path}' must be module.attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"Cannot import '{module_name}' for function {ddl.name}: {error}"
        ) from None
    if not hasattr(module, attribute):
        raise ValueError(f"Module '{module_name}' has no attribute '{attribute}'")
    function = getattr(module, attribute)
    if isinstance(function, type):
        function = function()
    if not hasattr(function, "kind") or not callable(function):
        raise ValueError(
            f"'{ddl.path}' must be what udf(), udtf() or udaf() returns,"
            f" got {type(function).__name__}"
        )
    return function
