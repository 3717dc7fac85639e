"""Runs of the benchmark as saved in ``results.json`` files: merged across files and grouped
per (workload, system) for the report.

Invariant: pure over the saved dictionaries; shared by the runner (``bench/__main__.py``)
and ``python -m bench.window_report``, so neither imports the other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bench.report_tables import Group

__all__ = ["group_results", "merge_saved"]


def group_results(results: Sequence[dict[str, Any]]) -> list[Group]:
    order: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        order.setdefault((r["case"], r["system"]), []).append(r)
    return [Group(case, system, tuple(runs)) for (case, system), runs in order.items()]


def merge_saved(paths: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Combine saved runs; a later file's runs of a (case, system) replace earlier ones.

    A case's parameters (e.g. the common latency rate) come from the latest file that ran
    Cairn on it: peers measured in another run keep their own rates in their rows' notes.
    """
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    meta: dict[str, Any] = {}
    commands: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        fresh: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in saved["results"]:
            fresh.setdefault((r["case"], r["system"]), []).append(r)
        runs.update(fresh)
        with_cairn = {r["case"] for r in saved["results"] if r["system"] == "cairn"}
        cases = dict(meta.get("cases", {}))
        for name, spec in saved["meta"]["cases"].items():
            if name not in cases or name in with_cairn:
                cases[name] = spec
        meta = {
            **saved["meta"],
            "cases": cases,
            "repeat": max(meta.get("repeat", 0), saved["meta"]["repeat"]),
        }
        commands.append(re.sub(r" --(results|chart) \S+", "", saved["meta"]["command"]))
    meta["command"] = "` + `".join(dict.fromkeys(commands))
    return [r for group in runs.values() for r in group], meta
