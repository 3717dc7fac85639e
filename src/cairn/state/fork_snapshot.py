"""The asynchronous part of a large snapshot in a forked child process.

Invariant: the child sees a copy-on-write image of the parent taken by ``fork`` during the
synchronous part, so the image *is* the snapshot copy; the child only runs the pure-Python
``produce`` callable (serialization) and raw ``os.write`` calls on its own pipe, never
touches a lock, a logger, a socket or a file object it inherited, and always leaves through
``os._exit``. The parent receives the state file's bytes and each section's range, exactly
what ``assemble_file`` builds in a thread, and writes them with the task's writer: handles
and file layout are the same on both paths.

Why: the thread that used to run the asynchronous part shares the task's GIL, and
``pickle.dumps`` of a large key group holds the GIL for its whole call, so processing stalled
while large snapshots were written. The child has its own interpreter (its own GIL) and runs
at a lower CPU priority (``os.nice``): on a machine whose cores are all busy processing, it
takes only a small share of a core instead of half of the task's time.

Protocol on the pipe (child → parent), all little-endian::

    file bytes (magic + sections) | trailer | u64 trailer length | 8-byte status marker

The trailer is a pickled ``(list[(section_id, length, crc32)], stats)`` after ``_OK``, or
the UTF-8 text of the child's error after ``_FAILED``. A child that dies leaves the marker
out, which the parent reports with the child's exit status.

>>> child = ForkedSerializer.start(lambda: [(0, b"abc"), (3, b"de")], b"M")
>>> data, ranges = child.result()
>>> data, ranges[3] == StreamRange(4, 2, zlib.crc32(b"de"))
(b'Mabcde', True)
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import resource
import select
import struct
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from cairn.checkpoint.handles import StreamRange
from cairn.settings import DEFAULT_FORK_NICENESS
from cairn.state.errors import StateError

__all__ = [
    "DEFAULT_NICENESS",
    "DEFAULT_STALL_TIMEOUT_S",
    "ForkedSerializer",
    "SnapshotChildError",
    "fork_supported",
]

log = logging.getLogger(__name__)

DEFAULT_NICENESS = DEFAULT_FORK_NICENESS
"""Added to the child's nice value: on a core busy with a task it gets ~3 % of the CPU
(scheduler weight 36 vs. 1024), on an idle core all of it. Measured on 2 cores with 5M keys
(bench/RESULTS.md): nice 10 cost the task 13-19 % of its throughput while the child ran,
nice 15 about 7 %, for checkpoints ~3 s either way."""

DEFAULT_STALL_TIMEOUT_S = 300.0
"""The parent kills a child that sent nothing for this long (a wedged child must not hold
the snapshot pool forever; a slow one at low priority still sends a section now and then)."""

_OK = b"CAIRN-OK"
_FAILED = b"CAIRN-NO"
_TAIL = struct.Struct("<Q8s")
_PIPE_SIZE = 1 << 20
_READ_CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux fcntl; fcntl.F_SETPIPE_SZ only exists from Python 3.10 on Linux

Produce = Callable[[], Iterable[tuple[int, bytes]]]


class SnapshotChildError(StateError):
    """The child serializing a snapshot failed, died or stalled."""


def fork_supported() -> bool:
    """Whether this platform can serialize snapshots in a forked child (POSIX ``fork``)."""
    return hasattr(os, "fork") and sys.platform != "emscripten"


class ForkedSerializer:
    """One child process writing one state file's bytes into a pipe.

    ``start`` forks (call it from the synchronous part: the state as of that instant is
    what the child serializes); ``result`` (from any thread) waits for the bytes. A
    serializer whose ``result`` is never called kills its child when garbage-collected.
    """

    def __init__(self, pid: int, fd: int, stall_timeout_s: float) -> None:
        self._pid = pid
        self._fd = fd
        self._stall_timeout_s = stall_timeout_s
        self._done = False
        self.child_stats: dict[str, float] = {}
        """After ``result``: the child's ``cpu_s``, ``wall_s`` and ``page_faults`` (its
        copy-on-write copies), for logs and benchmarks."""

    @classmethod
    def start(
        cls,
        produce: Produce,
        magic: bytes,
        *,
        niceness: int = DEFAULT_NICENESS,
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    ) -> ForkedSerializer:
        """Fork a child that writes ``magic`` and each ``(section_id, bytes)`` of ``produce()``.

        Raises ``OSError`` when the pipe or the fork cannot be created (the caller falls back
        to serializing in a thread).
        """
        r, w = os.pipe()
        try:
            _grow_pipe(w)
            pid = _fork()
        except BaseException:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # child: never returns
            _child_main(r, w, produce, magic, niceness)
        os.close(w)
        return cls(pid, r, stall_timeout_s)

    def result(self) -> tuple[bytes, dict[int, StreamRange]]:
        """The state file's bytes and each section's range, once the child finished."""
        if self._done:
            raise RuntimeError("ForkedSerializer.result() may be called once")
        self._done = True
        try:
            chunks = self._read_all()
        finally:
            os.close(self._fd)
            status = self._reap()
        data, ranges, self.child_stats = _parse(chunks, status)
        log.debug("snapshot child %d: %d bytes, %s", self._pid, len(data), self.child_stats)
        return data, ranges

    def cancel(self) -> None:
        """Kill the child (if still running) and release its pipe."""
        if self._done:
            return
        self._done = True
        try:
            os.kill(self._pid, 9)
        except ProcessLookupError:
            pass
        os.close(self._fd)
        self._reap()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            try:
                self.cancel()
            except OSError:
                pass

    def _read_all(self) -> list[bytes]:
        chunks: list[bytes] = []
        fd = self._fd
        poller = select.poll()  # not select(): descriptors of a busy worker may exceed 1023
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if not poller.poll(self._stall_timeout_s * 1000):
                try:
                    os.kill(self._pid, 9)
                except ProcessLookupError:
                    pass
                raise SnapshotChildError(
                    f"snapshot child {self._pid} sent nothing for {self._stall_timeout_s:g} s "
                    "and was killed"
                )
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return chunks
            chunks.append(chunk)

    def _reap(self) -> int | None:
        try:
            _, status = os.waitpid(self._pid, 0)
        except ChildProcessError:  # SIGCHLD ignored: reaped by the kernel
            return None
        return status


def _fork() -> int:
    if sys.version_info >= (3, 12):  # pragma: no cover - the child never starts threads
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            return os.fork()
    return os.fork()


def _grow_pipe(fd: int) -> None:
    """Fewer, larger reads for the parent (best effort, Linux only)."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, OSError):
        pass


def _parse(
    chunks: list[bytes], status: int | None
) -> tuple[bytes, dict[int, StreamRange], dict[str, float]]:
    """Split what the child sent into file bytes (one copy: the join), ranges and stats."""
    died = f"snapshot child died before finishing ({_describe(status)})"
    total = sum(map(len, chunks))
    if total < _TAIL.size:
        raise SnapshotChildError(died)
    trailer_len, marker = _TAIL.unpack(_take_tail(chunks, _TAIL.size))
    if marker not in (_OK, _FAILED) or trailer_len > total - _TAIL.size:
        raise SnapshotChildError(died)
    trailer = _take_tail(chunks, trailer_len)
    if marker == _FAILED:
        raise SnapshotChildError(
            "serializing the snapshot failed in the snapshot child:\n"
            + trailer.decode("utf-8", "replace")
        )
    table: list[tuple[int, int, int]]
    table, stats = pickle.loads(trailer)
    data = b"".join(chunks)
    chunks.clear()
    ranges: dict[int, StreamRange] = {}
    offset = len(data) - sum(length for _, length, _ in table)
    for section_id, length, crc in table:
        ranges[section_id] = StreamRange(offset, length, crc)
        offset += length
    return data, ranges, stats


def _take_tail(chunks: list[bytes], n: int) -> bytes:
    """Remove the last ``n`` bytes from ``chunks`` and return them."""
    parts: list[bytes] = []
    while n > 0:
        last = chunks.pop()
        if len(last) > n:
            chunks.append(last[:-n])
            last = last[-n:]
        parts.append(last)
        n -= len(last)
    return b"".join(reversed(parts))


def _describe(status: int | None) -> str:
    if status is None:
        return "exit status unknown"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


# ------------------------------------------------------------------------------- the child


def _child_main(r: int, w: int, produce: Produce, magic: bytes, niceness: int) -> None:
    """Serialize, write, exit. Runs in the forked child; never returns, never raises."""
    code = 1
    started = time.monotonic()
    try:
        gc.disable()  # no finalizers of inherited objects (they may take inherited locks)
        os.close(r)
        # Drop every inherited descriptor but our pipe: a copy of a socket held here would
        # keep the parent's connections open after the parent died (delaying failure
        # detection), and other snapshot pipes would not see their readers go away.
        os.closerange(3, w)
        os.closerange(w + 1, _max_fd())
        if niceness:
            try:
                os.nice(niceness)
            except OSError:
                pass
        parent = os.getppid()
        _write_all(w, magic)
        table: list[tuple[int, int, int]] = []
        for section_id, data in produce():
            _write_all(w, data)
            table.append((section_id, len(data), zlib.crc32(data)))
            if os.getppid() != parent:  # orphaned: nobody will read the result
                os._exit(2)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        stats = {
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "wall_s": round(time.monotonic() - started, 3),
            "page_faults": usage.ru_minflt,
        }
        _write_all(w, _trailer(pickle.dumps((table, stats), protocol=5), _OK))
        code = 0
    except BaseException:
        try:
            text = traceback.format_exc().encode("utf-8", "replace")
            _write_all(w, _trailer(text, _FAILED))
        except BaseException:
            pass
    finally:
        os._exit(code)


def _max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (ValueError, OSError):
        return 65536


def _trailer(body: bytes, marker: bytes) -> bytes:
    return body + _TAIL.pack(len(body), marker)


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
