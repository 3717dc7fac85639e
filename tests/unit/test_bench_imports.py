"""The benchmark uses Cairn's and its own modules through their public names only: no private
name is imported across modules, and nothing comes from the CLI (the skew experiment it shares
with ``cairn demo skew`` lives in ``cairn.experiments.skew``)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _imports() -> list[tuple[str, str, str]]:
    """``(file, module, name)`` of every ``from module import name`` in bench/*.py."""
    found = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found += [(path.name, node.module, alias.name) for alias in node.names]
    return found


def test_bench_imports_no_private_names_of_cairn_or_of_other_bench_modules() -> None:
    imports = _imports()
    assert any(module.startswith("cairn.") for _f, module, _n in imports)  # the scan works
    private = [
        f"{file}: from {module} import {name}"
        for file, module, name in imports
        if module.split(".")[0] in ("cairn", "bench") and name.startswith("_")
    ]
    assert private == []


def test_bench_does_not_import_the_cli() -> None:
    from_cli = [f"{f}: {m}" for f, m, _n in _imports() if m.startswith("cairn.cli")]
    assert from_cli == []
