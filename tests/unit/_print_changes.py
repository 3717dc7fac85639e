"""Reading what a table job's ``print`` sinks wrote (``counts> +I[a, 1]``, ``counts:2> ...``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def changes(out: str, sink: str) -> list[str]:
    """The changes ``sink`` (its ``print-identifier``) wrote, in order."""
    return [line.split("> ", 1)[1] for line in out.splitlines() if line.startswith(sink)]


def first_change_per_key(lines: list[str]) -> dict[str, tuple[str, int]]:
    """Each key's first change of a ``(key, count)`` changelog: its kind and its count."""
    firsts: dict[str, tuple[str, int]] = {}
    for change in lines:
        kind, body = change[:2], change[3:-1]
        key, n = body.split(", ")
        firsts.setdefault(key, (kind, int(n)))
    return firsts


def read_until(capfd: Any, done: Callable[[str], bool], timeout_s: float = 60) -> str:
    """What the jobs printed, read until ``done`` holds for it (or the time is up)."""
    seen = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen += capfd.readouterr().out
        if done(seen):
            break
        time.sleep(0.05)
    return seen
