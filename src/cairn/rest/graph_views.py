"""The job's plan, configuration and exceptions in Flink's REST shapes (``plan`` of
``/jobs/:jobid``, ``/jobs/:jobid/config``, ``/jobs/:jobid/exceptions``), for the web UI and
tools written for Flink.

Invariant: pure functions of immutable facts; user-provided names and tracebacks go out as
JSON strings only (the web UI sets them as text, never as markup).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.ids import JobId

__all__ = ["EdgeFacts", "ExceptionFacts", "exceptions", "job_config", "plan"]


@dataclass(frozen=True)
class EdgeFacts:
    source: int
    target: int
    partitioner: str  # forward, hash, rebalance, ...


@dataclass(frozen=True)
class ExceptionFacts:
    timestamp_ms: int
    text: str  # the error with the user's (remote) traceback


def plan(
    job_id: JobId,
    name: str,
    vertices: Sequence[tuple[int, str, int]],
    edges: Sequence[EdgeFacts],
) -> dict[str, Any]:
    """Flink's ``plan``: nodes with their inputs and ship strategy.

    >>> p = plan("j", "sums", [(0, "src", 2), (1, "sum", 2)], [EdgeFacts(0, 1, "hash")])
    >>> p["nodes"][1]["inputs"]
    [{'num': 0, 'id': '0', 'ship_strategy': 'HASH', 'exchange': 'pipelined_bounded'}]
    """
    nodes = []
    for vid, vname, parallelism in vertices:
        inputs = [
            {
                "num": i,
                "id": str(e.source),
                "ship_strategy": e.partitioner.upper(),
                "exchange": "pipelined_bounded",
            }
            for i, e in enumerate(x for x in edges if x.target == vid)
        ]
        node: dict[str, Any] = {
            "id": str(vid),
            "parallelism": parallelism,
            "operator": "",
            "operator_strategy": "",
            "description": vname,
        }
        if inputs:
            node["inputs"] = inputs
        nodes.append(node)
    return {"jid": job_id, "name": name, "type": "STREAMING", "nodes": nodes}


def job_config(job_id: JobId, name: str, configuration: Mapping[str, str]) -> dict[str, Any]:
    """``/jobs/:jobid/config``: the keys the user set (secrets already masked by the caller).

    >>> job_config("j", "n", {"b": "2", "a": "1"})["execution-config"]["user-config"]
    {'a': '1', 'b': '2'}
    """
    return {
        "jid": job_id,
        "name": name,
        "execution-config": {"user-config": dict(sorted(configuration.items()))},
    }


def exceptions(history: Sequence[ExceptionFacts], final: ExceptionFacts | None) -> dict[str, Any]:
    """``/jobs/:jobid/exceptions``: the newest first in ``exceptionHistory``.

    >>> body = exceptions([ExceptionFacts(5, "ValueError: x")], None)
    >>> body["exceptionHistory"]["entries"][0]["exceptionName"], body["root-exception"]
    ('ValueError', None)
    """
    entries = [
        {
            "exceptionName": e.text.split(":", 1)[0].split()[-1] if e.text else "",
            "stacktrace": e.text,
            "timestamp": e.timestamp_ms,
        }
        for e in reversed(history)
    ]
    return {
        "root-exception": None if final is None else final.text,
        "timestamp": None if final is None else final.timestamp_ms,
        "all-exceptions": [],
        "truncated": False,
        "exceptionHistory": {"entries": entries, "truncated": False},
    }
