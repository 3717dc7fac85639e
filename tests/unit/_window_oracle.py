"""An independent computation of a group window aggregate's output, for tests: each row is
added to every window (found by brute force over the window starts) that has not fired when
it arrives; a window fires when the watermark reaches ``end - 1``.

Random inputs for it: out-of-order rows, watermarks between batches, and late rows."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

__all__ = ["cumulating_windows", "random_events", "sliding_windows", "window_outputs"]

Windows = Callable[[int], list[tuple[int, int]]]
#: ``("rows", [(ts, key, value), ...])`` or ``("watermark", ms)``
Event = tuple[str, Any]


def sliding_windows(size: int, slide: int, offset: int = 0) -> Windows:
    def windows(ts: int) -> list[tuple[int, int]]:
        out = []
        start = offset + ((ts - size - offset) // slide) * slide  # at or before any window
        while start <= ts:
            if start <= ts < start + size:
                out.append((start, start + size))
            start += slide
        return out

    return windows


def cumulating_windows(size: int, step: int, offset: int = 0) -> Windows:
    def windows(ts: int) -> list[tuple[int, int]]:
        period = offset + ((ts - offset) // size) * size
        return [(period, end) for end in range(period + step, period + size + 1, step) if ts < end]

    return windows


def random_events(seed: int, keys: str = "abc", batches: int = 40) -> list[Event]:
    """Batches of rows around a rising watermark: most rows near it, some earlier (late
    for some or all of their windows), some NULL values; a watermark after each batch."""
    rng = random.Random(seed)
    events: list[Event] = []
    watermark = 0
    for _ in range(batches):
        rows = []
        for _ in range(rng.randint(0, 8)):
            ts = watermark + rng.randint(-14_000, 6_000)
            value = None if rng.random() < 0.1 else rng.randint(-5, 20)
            rows.append((ts, rng.choice(keys), value))
        events.append(("rows", rows))
        watermark += rng.randint(0, 3_000)
        events.append(("watermark", watermark))
    events.append(("watermark", 10**15))
    return events


def window_outputs(
    events: list[Event], windows: Windows, aggregate: Callable[[list[Any]], tuple[Any, ...]]
) -> list[list[tuple[Any, int, int, tuple[Any, ...]]]]:
    """Per watermark, the windows it fires, sorted: ``(key, start, end, aggregate(values))``
    (``values``: the rows' values added to the window, NULLs included)."""
    open_windows: dict[tuple[Any, int, int], list[Any]] = {}
    watermark = -(2**63)
    fired: list[list[tuple[Any, int, int, tuple[Any, ...]]]] = []
    for kind, payload in events:
        if kind == "rows":
            for ts, key, value in payload:
                for start, end in windows(ts):
                    if end - 1 > watermark:
                        open_windows.setdefault((key, start, end), []).append(value)
            continue
        watermark = payload
        due = sorted(w for w in open_windows if w[2] - 1 <= watermark)
        fired.append([(k, s, e, aggregate(open_windows.pop((k, s, e)))) for k, s, e in due])
    return fired
