"""Which unproven connection a full listener turns away, and how rejections are logged.

Invariants: a full listener always admits the newcomer and turns away the oldest connection
of the address holding the most pending handshakes, preferring one that has not sent a byte,
so an address flooding the listener only ever displaces its own connections while another
address is outnumbered, and a newcomer that answers promptly is displaced only after as many
newer connections arrived as the listener holds; the rejection log writes at most one line
per kind and interval plus one summary line with the counts, however many peers are rejected.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["PendingHandshake", "RejectionKind", "RejectionLog", "choose_victim"]


@dataclass(frozen=True)
class PendingHandshake:
    """What a listener knows of a connection that has not proven the job secret yet."""

    host: str  # the peer's address, without the port
    received: int  # bytes of its proof received so far


def choose_victim(pending: Sequence[PendingHandshake]) -> int:
    """The index in ``pending`` (oldest first) of the connection a full listener turns away.

    Among the connections of the address with the most of them (the first such address in
    ``pending`` on a tie), the oldest that has sent nothing, else its oldest.

    >>> flood = [PendingHandshake("10.0.0.9", 0)] * 3
    >>> choose_victim([PendingHandshake("10.0.0.2", 0), *flood])  # not the lone worker
    1
    >>> choose_victim([PendingHandshake("10.0.0.9", 40), *flood])  # it is proving itself
    1
    """
    if not pending:
        raise ValueError("no pending handshake to turn away")
    counts = Counter(p.host for p in pending)
    crowded = max(counts, key=lambda host: counts[host])  # first most common on a tie
    mine = [i for i, p in enumerate(pending) if p.host == crowded]
    return next((i for i in mine if pending[i].received == 0), mine[0])


class RejectionKind(enum.Enum):
    """Why a listener rejected a connection (the summary line counts per kind)."""

    TIMED_OUT = "timed out"  # no complete proof, or no HELLO, within the deadline
    TURNED_AWAY = "turned away"  # the listener was full: the oldest unproven one goes
    UNAUTHENTICATED = "unauthenticated"  # wrong secret, not Cairn, another wire version
    BAD_HELLO = "bad hello"  # authenticated, but its first frame was no HELLO
    ACCEPT_FAILED = "accept failed"  # accept() itself failed (e.g. out of file descriptors)


@dataclass
class _Window:
    start: float
    logged: set[RejectionKind] = field(default_factory=set)
    suppressed: Counter[RejectionKind] = field(default_factory=Counter)
    last_message: str = ""


class RejectionLog:
    """Rate-limits a listener's rejection warnings: the first rejection of each kind in an
    ``interval_s`` window is logged in full, the others only counted, and the window's end
    yields one summary line. Thread-safe; the caller passes the time (monotonic seconds).

    >>> log = RejectionLog(interval_s=10.0)
    >>> log.record(RejectionKind.TIMED_OUT, "127.0.0.1:5001: too slow", now=0.0)
    ['127.0.0.1:5001: too slow']
    >>> log.record(RejectionKind.TIMED_OUT, "127.0.0.1:5002: too slow", now=1.0)
    []
    >>> log.record(RejectionKind.TURNED_AWAY, "127.0.0.1:5003: full", now=2.0)
    ['127.0.0.1:5003: full']
    >>> log.record(RejectionKind.TURNED_AWAY, "127.0.0.1:5004: full", now=3.0)
    []
    >>> log.summary(now=9.0) is None  # the window is still open
    True
    >>> print(log.summary(now=10.0))
    2 more rejected in the last 10 s (timed out: 1, turned away: 1); the last: 127.0.0.1:5004: full
    >>> log.summary(now=30.0) is None  # nothing more was rejected
    True
    """

    def __init__(self, interval_s: float = 10.0) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._window: _Window | None = None
        self.total: Counter[RejectionKind] = Counter()  # every rejection ever, per kind

    def record(self, kind: RejectionKind, message: str, now: float) -> list[str]:
        """Count one rejection; return the lines to log now: the summary of a window that
        ended, if it held rejections back, and ``message`` if it is the first of its kind."""
        with self._lock:
            lines = self._close(now, force=False)
            self.total[kind] += 1
            window = self._window
            if window is None:
                window = self._window = _Window(now)
            if kind not in window.logged:
                window.logged.add(kind)
                lines.append(message)
            else:
                window.suppressed[kind] += 1
                window.last_message = message
            return lines

    def summary(self, now: float, force: bool = False) -> str | None:
        """The summary line of the window if it ended (or ``force``) and held rejections
        back; the window is closed either way once it ended."""
        with self._lock:
            lines = self._close(now, force)
            return lines[0] if lines else None

    def _close(self, now: float, force: bool) -> list[str]:
        window = self._window
        if window is None or (not force and now < window.start + self.interval_s):
            return []
        self._window = None
        if not window.suppressed:
            return []
        order = list(RejectionKind)
        counts = ", ".join(
            f"{kind.value}: {n}"
            for kind, n in sorted(window.suppressed.items(), key=lambda kv: order.index(kv[0]))
        )
        total = sum(window.suppressed.values())
        return [
            f"{total} more rejected in the last {now - window.start:.2g} s ({counts}); "
            f"the last: {window.last_message}"
        ]
