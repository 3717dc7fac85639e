"""Process helpers for fault-injection tests: find, kill, wait for and isolate OS processes.

Invariant: every finder tolerates processes that vanish while it looks at them (a process
that is gone is simply not reported), so tests racing against Spark's own restarts do not
fail with spurious ``NoSuchProcess`` errors. Tests wait through :func:`wait_for` (until a
condition holds) and :func:`holds_for` (that it keeps holding), never through bare sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import cloudpickle
import psutil

__all__ = [
    "CAIRN_DAEMON",
    "EXECUTOR_CLASS",
    "PYSPARK_DAEMON",
    "SubprocessFailed",
    "descendant_pids",
    "find_ancestor",
    "find_processes",
    "holds_for",
    "kill_process",
    "python_workers_of",
    "run_in_subprocess",
    "terminate_tree",
    "wait_for",
    "wait_for_async",
]

T = TypeVar("T")

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
PYSPARK_DAEMON = "pyspark.daemon"
CAIRN_DAEMON = "cairn.deploy.spark_daemon"  # the daemon module of sessions Cairn creates

# Runs in the child: load (fn, args), call, store ("ok", result) or ("error", text, traceback).
_CHILD_MAIN = """
import sys, traceback, cloudpickle
with open(sys.argv[1], "rb") as f:
    fn, args = cloudpickle.load(f)
try:
    outcome = ("ok", fn(*args))
except BaseException as exc:
    outcome = ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
with open(sys.argv[2], "wb") as f:
    cloudpickle.dump(outcome, f)
"""


class SubprocessFailed(RuntimeError):
    """The function run by :func:`run_in_subprocess` raised, crashed or timed out."""


def descendant_pids(pid: int) -> list[int]:
    """Pids of all living descendants of ``pid`` (children first), [] if ``pid`` is gone.

    >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> child.pid in descendant_pids(os.getpid())
    True
    >>> child.kill(); child.wait()
    -9
    """
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def find_processes(
    cmdline_contains: str | None = None,
    parent: int | Iterable[int] | None = None,
) -> list[int]:
    """Pids of living processes whose command line contains a string and/or with a given parent.

    ``parent`` is one pid or several; only direct children count. Zombies are skipped.

    Example (not a doctest: it needs a running system)::

        find_processes(EXECUTOR_CLASS, parent=worker_pid)
        # [4242]
    """
    if parent is None:
        candidates = list(psutil.process_iter())
    else:
        candidates = _children_of(frozenset((parent,) if isinstance(parent, int) else parent))
    found = []
    for proc in candidates:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if cmdline_contains is not None and not _cmdline_has(proc, cmdline_contains):
                continue
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found.append(proc.pid)
    return sorted(found)


def find_ancestor(pid: int, cmdline_contains: str) -> int | None:
    """Nearest ancestor of ``pid`` whose command line contains the string, else None.

    Inside a Spark task this finds the JVM that runs the task's Python worker:

    Example (not a doctest: it needs a running system)::

        find_ancestor(os.getpid(), EXECUTOR_CLASS)
        # 4242
    """
    try:
        parents = psutil.Process(pid).parents()
    except psutil.NoSuchProcess:
        return None
    for proc in parents:
        try:
            if _cmdline_has(proc, cmdline_contains):
                return int(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def python_workers_of(jvm_pid: int) -> list[int]:
    """Pids of the PySpark worker processes a driver or executor JVM runs now.

    Workers are forked by the daemon child of the JVM (``pyspark.daemon``, or Cairn's, which
    preloads the worker's code); the daemon itself is not included, since killing it takes
    down every worker of that JVM at once.
    """
    daemons = {
        pid for name in (PYSPARK_DAEMON, CAIRN_DAEMON) for pid in find_processes(name, jvm_pid)
    }
    workers = [pid for daemon in daemons for pid in descendant_pids(daemon)]
    # Without the daemon (spark.python.use.daemon=false) workers are direct children.
    direct = [pid for pid in find_processes("pyspark", parent=jvm_pid) if pid not in daemons]
    return sorted(set(workers) | set(direct))


def kill_process(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to ``pid``; True if it was delivered, False if the process was gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def terminate_tree(pid: int, timeout: float = 10.0) -> list[int]:
    """Stop ``pid`` and all its descendants: SIGTERM, then SIGKILL after ``timeout`` seconds.

    Descendants are collected before the root is signalled, because an orphan is re-parented
    and could no longer be found. Returns the pids that had to be SIGKILLed.
    """
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for proc in tree:
        _signal_quietly(proc, signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=timeout)
    for proc in alive:
        _signal_quietly(proc, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=timeout)
    return [proc.pid for proc in alive]


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.1,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Raises ``TimeoutError`` naming ``message`` (a string or a callable producing one, for
    details that are only worth computing on failure) after ``timeout`` seconds.

    >>> wait_for(lambda: 42, timeout=1.0)
    42
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {text}")
        time.sleep(interval)


async def wait_for_async(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float,
    interval: float = 0.1,
    message: str | Callable[[], str] = "condition",
) -> T:
    """:func:`wait_for` inside an event loop: sleeps with ``asyncio.sleep`` (the loop runs
    on meanwhile), and awaits the predicate's value when it is awaitable.

    >>> asyncio.run(wait_for_async(lambda: asyncio.sleep(0, result="up"), timeout=1.0))
    'up'
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {text}")
        await asyncio.sleep(interval)


def holds_for(
    predicate: Callable[[], object],
    seconds: float,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition",
) -> None:
    """Check that ``predicate`` stays truthy for ``seconds``: "nothing happens within T".

    Polls every ``interval`` seconds (first at once, last at the end) and raises
    ``AssertionError`` naming ``message`` as soon as the predicate is falsy, so a test that
    asserts the absence of an event fails when the event happens, not after a fixed sleep.

    >>> holds_for(lambda: True, seconds=0.05, interval=0.01)
    >>> holds_for(lambda: False, seconds=1.0, message="no output")
    Traceback (most recent call last):
    AssertionError: no output stopped holding after 0.0 s of 1.0 s
    """
    started = time.monotonic()
    deadline = started + seconds
    while True:
        if not predicate():
            text = message() if callable(message) else message
            held = time.monotonic() - started
            raise AssertionError(f"{text} stopped holding after {held:.1f} s of {seconds:.1f} s")
        now = time.monotonic()
        if now >= deadline:
            return
        time.sleep(min(interval, deadline - now))


def run_in_subprocess(
    fn: Callable[..., T],
    *args: Any,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> T:
    """Call ``fn(*args)`` in a fresh Python interpreter and return its (picklable) result.

    A process holds one SparkContext, so a test that needs a second one (a standalone
    cluster next to the suite's local session) runs its driver side here. ``fn`` and
    ``args`` travel with cloudpickle; functions of a module the child cannot import (a test
    module) need ``cloudpickle.register_pickle_by_value(module)`` first. An exception in the
    child becomes :class:`SubprocessFailed` carrying the child's traceback; on timeout the
    child's whole process tree (e.g. its Spark JVM) is killed.

    >>> run_in_subprocess(pow, 2, 10)
    1024
    """
    with tempfile.TemporaryDirectory(prefix="cairn-subprocess-") as tmp:
        call, result = Path(tmp, "call.pkl"), Path(tmp, "result.pkl")
        call.write_bytes(cloudpickle.dumps((fn, args)))
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, str(call), str(result)],
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its tree can be killed as one without touching ours
        )
        try:
            returncode = child.wait(timeout=timeout)
        except BaseException:  # timeout or Ctrl-C: no orphaned JVMs either way
            terminate_tree(child.pid, timeout=5.0)
            child.wait()
            raise
        if not result.exists():
            raise SubprocessFailed(f"{fn!r} died without a result (exit status {returncode})")
        outcome = cloudpickle.loads(result.read_bytes())
    if outcome[0] == "ok":
        value: T = outcome[1]
        return value
    raise SubprocessFailed(f"{outcome[1]}\n--- child traceback ---\n{outcome[2]}")


def _children_of(parents: frozenset[int]) -> list[psutil.Process]:
    children: list[psutil.Process] = []
    for pid in parents:
        try:
            children.extend(psutil.Process(pid).children())
        except psutil.NoSuchProcess:
            continue
    return children


def _cmdline_has(proc: psutil.Process, text: str) -> bool:
    return any(text in part for part in proc.cmdline())


def _signal_quietly(proc: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.send_signal(sig)
