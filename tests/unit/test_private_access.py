"""No module reaches into another module's private attributes.

Parses every module of ``src/cairn`` and ``bench`` with :mod:`ast`; fails on a private name
imported from another of their modules (``from cairn.x import _name``), and looks at each
attribute access ``expr._name`` (one leading underscore, not a dunder) whose object is not
``self``, ``cls`` or ``super()``. Such an access passes only if ``_name`` is defined by a
class of the same module (assigned as ``self._name``/``cls._name``, declared in
``__slots__``, defined as ``def _name`` or a class attribute): friendship within one module
is allowed, reaching across modules is not (ARCHITECTURE.md, "Narrow interfaces"). The
exceptions are third-party internals with no public equivalent, listed with a reason in
:data:`ALLOWED`.

Also runnable alone: ``python tests/unit/test_private_access.py [SRC_CAIRN_DIR]`` prints
each offender as ``path:line: expr`` and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOTS = (ROOT / "src" / "cairn", ROOT / "bench")

# (path relative to the scanned root's parent, the expression as ``ast.unparse`` prints it)
# -> why the access stays.
ALLOWED: Mapping[tuple[str, str], str] = {
    ("cairn/deploy/spark_session.py", "sc._jsc"): (
        "PySpark exposes the JavaSparkContext only as SparkContext._jsc"
    ),
    ("cairn/deploy/spark_session.py", "SparkContext._active_spark_context"): (
        "PySpark's only way to see a running context without creating one"
    ),
    ("cairn/deploy/job_pickling.py", "_cloudpickle_impl._code_reduce"): (
        "cloudpickle has no public reducer for code objects"
    ),
    ("cairn/checkpoint/hdfs_files.py", "fs_class._cache"): (
        "fsspec has no public view of its instance cache, which its at-fork hook clears"
    ),
    ("cairn/checkpoint/ha/s3_store.py", "self._fs._call_s3"): (
        "s3fs has no public call for conditional puts and raw S3 requests"
    ),
    ("cairn/checkpoint/ha/gcs_store.py", "self._fs._call"): (
        "gcsfs has no public call for generation preconditions or an object's generation"
    ),
    ("cairn/checkpoint/ha/gcs_store.py", "self._fs._location"): (
        "gcsfs names its endpoint (an emulator's too) only as _location, for upload URLs"
    ),
    ("cairn/cli/jobs.py", "argparse._SubParsersAction"): (
        "argparse has no public name for the type add_subparsers() returns"
    ),
    **{
        ("cairn/datastream/connectors/kafka/source_reader.py", f"KafkaError.{code}"): (
            "librdkafka's local error codes, underscored in confluent-kafka's documented API"
        )
        for code in ("_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_AUTO_OFFSET_RESET")
    },
    **{
        ("cairn/cli/chaos_capture.py", f"KafkaError.{code}"): (
            "librdkafka's local error codes, underscored in confluent-kafka's documented API"
        )
        for code in ("_UNKNOWN_PARTITION", "_AUTO_OFFSET_RESET")
    },
    **{
        ("cairn/table/sql/dialect.py", expr): (
            "sqlglot's parser extension API: a dialect's parse functions read the token stream"
            " through Parser._curr/_advance, as sqlglot's own dialects do"
        )
        for expr in ("parser._curr", "parser._advance")
    },
    ("cairn/checkpoint/stats.py", "_Figures._fields"): (
        "NamedTuple's documented API (underscore only to avoid field clashes)"
    ),
}

# Standard-library names documented as public despite the underscore.
PUBLIC_STDLIB: frozenset[str] = frozenset({"os._exit"})


def _defined_privates(tree: ast.Module) -> set[str]:
    """Underscore names a class of this module defines: its friends may touch them."""
    names: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                        if t.id == "__slots__" and stmt.value is not None:
                            names.update(
                                c.value
                                for c in ast.walk(stmt.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
        for node in ast.walk(cls):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id in ("self", "cls")
                    ):
                        names.add(sub.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _is_own(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _sources(root: Path) -> list[Path]:
    """The project's modules under ``root``: not in hidden folders (``bench/.peers`` holds
    the benchmark peers' virtual environments)."""
    return sorted(
        p
        for p in root.rglob("*.py")
        if not any(s.startswith(".") for s in p.relative_to(root).parts)
    )


def offenders(root: Path) -> Iterator[str]:
    """``path:line: expr`` for each access into another module's private, under ``root``."""
    for path in _sources(root):
        rel = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        friends = _defined_privates(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and (node.module or "").split(".")[0] in ("cairn", "bench"):
                        yield f"{path}:{node.lineno}: from {node.module} import {alias.name}"
                continue
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__") or _is_own(node.value):
                continue
            expr = ast.unparse(node)
            if attr in friends or expr in PUBLIC_STDLIB or (rel, expr) in ALLOWED:
                continue
            yield f"{path}:{node.lineno}: {expr}"


def test_no_access_to_another_modules_privates() -> None:
    found = [o for root in ROOTS for o in offenders(root)]
    assert not found, "private attributes reached from another module:\n" + "\n".join(found)


def test_the_check_allows_module_friends_and_flags_the_rest(tmp_path: Path) -> None:
    pkg = tmp_path / "cairn"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "class A:\n"
        "    _k = 0\n"
        "    def __init__(self):\n"
        "        self._x = 1\n"
        "    def same_module(self, other):\n"
        "        return other._x, other._k, super()._z, self.__dict__\n"
    )
    (pkg / "b.py").write_text("def reach(a):\n    return a._x\n")
    (pkg / "c.py").write_text("from cairn.a import _helper\nfrom os import _exit\n")
    assert list(offenders(pkg)) == [
        f"{pkg / 'b.py'}:2: a._x",
        f"{pkg / 'c.py'}:1: from cairn.a import _helper",
    ]


def test_allowlist_is_not_stale() -> None:
    exprs: set[tuple[str, str]] = set()
    for root in ROOTS:
        for path in _sources(root):
            rel = path.relative_to(root.parent).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute):
                    exprs.add((rel, ast.unparse(node)))
    assert set(ALLOWED) <= exprs, sorted(set(ALLOWED) - exprs)


if __name__ == "__main__":
    roots = [Path(a) for a in sys.argv[1:]] or list(ROOTS)
    bad = [o for r in roots for o in offenders(r)]
    print("\n".join(bad))
    sys.exit(1 if bad else 0)
