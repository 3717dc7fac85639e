"""No import cycles in ``cairn`` or ``bench``, counting every import: module level,
function level (deferred) and under ``if TYPE_CHECKING:``.

``lint-imports`` checks that packages point down the layers, but a cycle of modules can hide
inside one layer, or close through an import it was told to ignore. This test builds the
module graph with grimp (which sees function-level imports; ``exclude_type_checking_imports``
is passed as ``False`` so type-only imports count too), finds its strongly connected
components, and fails naming, for each one, a shortest cycle with the file and line of each
import on it, then every other import inside the component.

Allowed are only the knots declared in :data:`ALLOWED_KNOTS`, by module names. Also
runnable alone: ``python tests/unit/test_import_cycles.py`` prints the cycles and exits 1 if
there is one (``PYTHONPATH`` decides which tree is checked).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Set
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]

# Knots that are part of a design, by module name; a strongly connected component passes if
# all its modules are in one knot.
ALLOWED_KNOTS: Mapping[str, frozenset[str]] = {
    # PyFlink's fluent API: every stream type returns the others (DataStream.key_by gives a
    # KeyedStream, KeyedStream.window a WindowedStream whose results are DataStreams,
    # connect a ConnectedStreams, get_execution_environment the environment that made it),
    # so these modules import each other by design, lazily or for types.
    "fluent DataStream API": frozenset(
        {
            "cairn.datastream.connected_streams",
            "cairn.datastream.data_stream",
            "cairn.datastream.keyed_stream",
            "cairn.datastream.stream_execution_environment",
            "cairn.datastream.windowed_stream",
        }
    ),
}

PACKAGES = ("cairn", "bench")

Graph = Mapping[str, Set[str]]


def import_graph(package: str) -> tuple[grimp.ImportGraph, dict[str, set[str]]]:
    """The package's modules and the modules each imports, all imports counted."""
    graph = grimp.build_graph(
        package,
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    return graph, edges


def strongly_connected(edges: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative),
    each sorted; a module importing itself is not a cycle worth reporting.

    >>> sorted(strongly_connected({"a": {"b"}, "b": {"a", "c"}, "c": set()}))
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def shortest_cycle(edges: Graph, component: Iterable[str]) -> list[str]:
    """A shortest cycle inside ``component``, as modules ``[a, b, ..., a]``.

    >>> shortest_cycle({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}}, ["a", "b", "c"])
    ['a', 'b', 'a']
    """
    members = set(component)
    best: list[str] = []
    for start in sorted(members):
        parent: dict[str, str] = {}
        queue = deque([start])
        found = False
        while queue and not found:
            node = queue.popleft()
            for succ in sorted(edges[node] & members):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    cycle = [start, *reversed(path[:-1]), start]
                    if not best or len(cycle) < len(best):
                        best = cycle
                    found = True
                    break
                if succ not in parent:
                    parent[succ] = node
                    queue.append(succ)
    return best


def allowed(component: Iterable[str]) -> str | None:
    """The name of the declared knot that holds all of ``component``, if one does."""
    members = set(component)
    return next((name for name, knot in ALLOWED_KNOTS.items() if members <= knot), None)


def _where(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    spec = importlib.util.find_spec(importer)
    path = Path(spec.origin) if spec is not None and spec.origin else Path(importer)
    if path.is_relative_to(ROOT):
        path = path.relative_to(ROOT)
    lines = "; ".join(
        f"{path}:{d['line_number']}: {d['line_contents'].strip()}"
        for d in sorted(details, key=lambda d: d["line_number"])
    )
    return f"    {importer} -> {imported}  ({lines})"


def describe(graph: grimp.ImportGraph, edges: Graph, component: list[str]) -> str:
    """A component as a shortest cycle with its import lines, then its other imports."""
    cycle = shortest_cycle(edges, component)
    on_cycle = list(itertools.pairwise(cycle))
    text = [f"{len(component)} modules import each other: {', '.join(component)}"]
    text.append("  a shortest cycle:")
    text += [_where(graph, a, b) for a, b in on_cycle]
    others = [
        (a, b)
        for a in component
        for b in sorted(edges[a] & set(component))
        if (a, b) not in set(on_cycle)
    ]
    if others:
        text.append("  the other imports inside it:")
        text += [_where(graph, a, b) for a, b in others]
    return "\n".join(text)


def cycles_report(package: str) -> list[str]:
    """One description per cycle of ``package`` outside the declared knots."""
    graph, edges = import_graph(package)
    return [describe(graph, edges, c) for c in strongly_connected(edges) if allowed(c) is None]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    report = cycles_report(package)
    assert not report, f"import cycles in {package}:\n" + "\n\n".join(report)


def test_the_graph_counts_deferred_and_type_checking_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "knotted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from knotted import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from knotted import c\n"
    )
    (pkg / "c.py").write_text("import knotted.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph, edges = import_graph("knotted")
    assert strongly_connected(edges) == [["knotted.a", "knotted.b", "knotted.c"]]
    text = describe(graph, edges, ["knotted.a", "knotted.b", "knotted.c"])
    assert "knotted/b.py:3: from knotted import c" in text, text


def test_declared_knots_are_still_knots() -> None:
    """A declared knot that is no longer one (split, or a module renamed) is removed from
    :data:`ALLOWED_KNOTS`, so the allowance cannot silently cover a new cycle."""
    _graph, edges = import_graph("cairn")
    components = strongly_connected(edges)
    for name, knot in ALLOWED_KNOTS.items():
        assert any(set(c) == knot for c in components), f"{name}: no longer one knot"


def main() -> int:
    for path in (ROOT, ROOT / "src"):  # after PYTHONPATH: it chooses the tree to check
        sys.path.append(str(path))
    found = False
    for package in PACKAGES:
        for text in cycles_report(package):
            found = True
            print(f"{package}: {text}\n")
    print("import cycles found" if found else "no import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
