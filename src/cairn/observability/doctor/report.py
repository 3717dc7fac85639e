"""The doctor's findings as text for the terminal.

Invariant: a pure function of finding dicts (``Finding.to_dict()``, also what the control
endpoint sends), so a live job's findings and a checkpoint directory's print alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_findings"]


def format_findings(subject: str, checkpoints: int, findings: Sequence[Mapping[str, Any]]) -> str:
    """Findings, each with its figures, advice and configuration keys.

    >>> print(format_findings("job j1", 3, [{"rule": "r", "title": "t", "figures": {"a": "1"},
    ...                                      "advice": "do x", "keys": ["k: v"]}]))
    cairn doctor: 1 finding for job j1 (3 checkpoints looked at)
    <BLANKLINE>
    [r] t
        a: 1
        advice: do x
        set: k: v
    >>> print(format_findings("job j1", 0, []))
    cairn doctor: no findings for job j1 (0 checkpoints looked at)
    """
    count = (
        f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "no findings"
    )
    lines = [f"cairn doctor: {count} for {subject} ({checkpoints} checkpoints looked at)"]
    for f in findings:
        lines += ["", f"[{f['rule']}] {f['title']}"]
        lines += [f"    {k}: {v}" for k, v in f["figures"].items()]
        lines += [f"    advice: {f['advice']}", f"    set: {', '.join(f['keys'])}"]
    return "\n".join(lines)
