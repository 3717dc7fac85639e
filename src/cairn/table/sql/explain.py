"""``EXPLAIN [PLAN FOR | detail, ...] query | INSERT | STATEMENT SET``: the plan's text.

Invariant: pure text — a query's result is exactly ``Table.explain()``'s text (the
sections, the changelog modes, the advice); an ``INSERT`` puts its sink on top of each
section's tree as Flink prints it (``Sink(table=[...], fields=[...])``, the query's field
names), and a statement set lists one such tree per insert in each section, its advice
numbered across them. ``ESTIMATED_COST``, ``CHANGELOG_MODE`` and ``JSON_EXECUTION_PLAN``
change nothing (Cairn always shows changelog modes and has no cost model); ``PLAN_ADVICE``
asks for Flink's "No available advice..." when there is none.

>>> text = "== A ==\\nCalc() changelogMode=[I]\\n+- Values() changelogMode=[I]\\n"
>>> print(with_sinks([(text, "Sink(table=[t], fields=[a])")], False), end="")
== A ==
Sink(table=[t], fields=[a]) changelogMode=[NONE]
+- Calc() changelogMode=[I]
   +- Values() changelogMode=[I]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["sink_line", "with_sinks"]

_ADVICE = re.compile(r"advice\[\d+\]: ")
_NO_ADVICE = "No available advice..."


def sink_line(table: str, fields: Sequence[str]) -> str:
    """The sink node of an ``INSERT INTO table``, as Flink's plan prints it."""
    return f"Sink(table=[default_catalog.default_database.{table}], fields=[{', '.join(fields)}])"


def with_sinks(explained: Sequence[tuple[str, str | None]], plan_advice: bool) -> str:
    """One explain text of several ``Table.explain()`` texts, each under its sink line (None:
    a query, its text unchanged)."""
    if len(explained) == 1 and explained[0][1] is None:
        return explained[0][0]
    headers: list[str] = []
    trees: dict[str, list[str]] = {}
    advice: list[str] = []
    for text, sink in explained:
        for header, tree, notes in _sections(text):
            if header not in trees:
                headers.append(header)
                trees[header] = []
            trees[header].append(_under(tree, sink) if sink is not None else tree)
            advice.extend(notes)
    out = "\n\n".join(f"{h}\n" + "\n\n".join(trees[h]) for h in headers) + "\n"
    if advice:
        out += "\n" + "".join(f"advice[{i}]: {a}\n" for i, a in enumerate(advice, 1))
    elif plan_advice:
        out += f"\n{_NO_ADVICE}\n"
    return out


def _sections(text: str) -> list[tuple[str, str, list[str]]]:
    """Each ``== header ==`` of an explain text with its tree (and the advice after the last
    one)."""
    found: list[tuple[str, str, list[str]]] = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        if lines[0].startswith("== "):
            found.append((lines[0], "\n".join(lines[1:]), []))
        elif found:
            notes = [_ADVICE.sub("", line, count=1) for line in lines if _ADVICE.match(line)]
            found[-1][2].extend(notes)
    return found


def _under(tree: str, sink: str) -> str:
    lines = tree.split("\n")
    body = [f"+- {lines[0]}", *(f"   {line}" for line in lines[1:])]
    return "\n".join([f"{sink} changelogMode=[NONE]", *body])
