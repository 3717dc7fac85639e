"""The signal that wakes an idle task thread: ``threading.Event``'s set/clear/wait, cheaper.

Network, control and snapshot threads call ``set()`` thousands of times a second while the
task thread holds the GIL; ``threading.Event`` runs Python code under a ``Condition`` for
each call (and allocates a lock per wait), so every wake-up costs those threads a GIL
hand-over of several microseconds. Here each call is one or two calls into a C lock.

Invariant: the lock is held exactly while the signal is clear.
"""

from __future__ import annotations

import threading

__all__ = ["Wakeup"]


class Wakeup:
    """A binary signal: ``set()`` from any thread, ``wait()`` and ``clear()`` by the waiter.

    >>> w = Wakeup()
    >>> w.is_set(), w.wait(0.001)
    (False, False)
    >>> w.set(); w.set()  # setting twice is setting
    >>> w.is_set(), w.wait(0.001), w.is_set()  # wait does not clear, like Event.wait
    (True, True, True)
    >>> w.clear(); w.is_set()
    False
    """

    __slots__ = ("_clear",)

    def __init__(self) -> None:
        self._clear = threading.Lock()
        self._clear.acquire()

    def set(self) -> None:
        try:
            self._clear.release()
        except RuntimeError:
            pass  # already set (two setters may race: both mean "set")

    def clear(self) -> None:
        self._clear.acquire(False)

    def is_set(self) -> bool:
        return not self._clear.locked()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set or ``timeout`` seconds passed; True if set."""
        if self._clear.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self.set()  # leave it set; a setter racing in between has set it already
            return True
        return False
