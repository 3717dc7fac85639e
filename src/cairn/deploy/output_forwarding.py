"""What Spark worker processes print, forwarded to the driver's stdout in local mode.

Invariant: only whole lines travel (a partial line waits for its newline or a ``flush``), each
write's lines as one ``WorkerOutput`` message, in the order written; the job master writes them
to its own ``sys.stdout``. Why: Spark runs a local-mode worker as a child of its JVM and copies
the child's stdout to the JVM's *stderr*, so ``DataStream.print()`` and ``print()`` in user
functions would land on the driver's stderr among Spark's log lines, where PyFlink's local
MiniCluster prints to the process's stdout. On a cluster nothing is forwarded: a worker's
output stays in its executor's log, as a TaskManager's stays in its ``.out`` file.

>>> sent = []
>>> out = ForwardedStream(lambda text: sent.append(text))
>>> out.write("(hi,0,5,4)\\n(hi,5,")
17
>>> out.write("10,3)\\n")
6
>>> sent
['(hi,0,5,4)\\n', '(hi,5,10,3)\\n']
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ForwardedStream", "forwarding_stdout", "print_forwarded"]


class ForwardedStream(io.TextIOBase):
    """A text stream whose complete lines go to ``send`` (thread-safe)."""

    def __init__(self, send: Callable[[str], None]) -> None:
        super().__init__()
        self._send = send
        self._pending = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        with self._lock:
            text = self._pending + s
            cut = text.rfind("\n") + 1
            self._pending = text[cut:]
            if cut:
                self._send(text[:cut])
        return len(s)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                text, self._pending = self._pending, ""
                self._send(text)


@contextmanager
def forwarding_stdout(enabled: bool, send: Callable[[str], None]) -> Iterator[None]:
    """``sys.stdout`` forwarded through ``send`` while inside (if ``enabled``), then restored
    (a partial last line is sent)."""
    if not enabled:
        yield
        return
    previous = sys.stdout
    stream = ForwardedStream(send)
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = previous
        stream.flush()


def print_forwarded(text: str) -> None:
    """What a local-mode worker printed, on the driver's stdout (as PyFlink's local cluster);
    not fault tolerant, like ``print()``: output of a failed attempt stays printed."""
    sys.stdout.write(text)
    sys.stdout.flush()
