"""Spark's Python daemon (``pyspark.daemon``) with a Cairn worker's code imported before it
forks Python workers (``spark.python.daemon.module``, set for sessions Cairn creates).

Invariant: only imports (and the ``sys.path`` order they use) happen here before
``pyspark.daemon.manager()`` takes over: no thread, no connection, no file, nothing on stdout
(Spark reads the daemon's port from it); a worker forked from the daemon then starts without
importing Cairn (and s3fs, if installed) again -- on a failover, the restarted worker's
process is a new fork, so its restore starts sooner.

Spark puts ``pyspark.zip`` and py4j's zip first on a Python worker's path, even when the same
pyspark is installed as a package (a pip install ships the zip inside the package). Imports
from the zip compile every module from source (it holds no bytecode), and a worker's first
task calls ``importlib.invalidate_caches()`` (``setup_spark_files``), which makes every zip
importer read its directory again (1,485 entries, pure Python): measured on 2 cores, a freshly
forked worker spent 0.6-1.2 s there before the task's function ran, against ~0.1 s for a
reused one -- the replacement worker's start after a failure. ``without_bundled_zips`` drops
the zips that only duplicate the installed package, so both come from compiled bytecode.

A forked worker says nothing of a ``BrokenPipeError`` on its last flush, which happens when the
JVM closed the worker's socket first, as it does when a job ends or a stage is cancelled
(``quiet_worker``): a successful job printed that traceback after its result in some runs.
Every other write, and every other failure, passes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

# What ``deploy.executors._spark_worker_partition`` needs: the worker and everything below.
PRELOADED = ("cairn.deploy.executors", "cairn.state.rocksdb.backend")
# Imported only if present: S3 storage, and what pyspark.worker imports lazily in a task
# (measured in a fresh fork: ~150-250 ms of imports per worker, Spark 4.x module names).
OPTIONAL = (
    "s3fs",
    "pyspark.worker",
    "pyspark.worker_util",
    "pyspark.worker_message",
    "pyspark.logger.worker_io",
    "pyspark.sql.conversion",
    "pyspark.sql.streaming.stateful_processor_util",
)

_BUNDLED = {"pyspark.zip": "pyspark", "py4j": "py4j"}  # zip name (prefix) -> its package


def without_bundled_zips(
    path: Sequence[str],
    is_package: Callable[[str], bool] = lambda d: os.path.isfile(os.path.join(d, "__init__.py")),
) -> list[str]:
    """``path`` without the Spark zips (``.../lib/pyspark.zip``, ``.../lib/py4j-*.zip``) whose
    package is importable from a plain directory on the same path; a zip that is the only
    source of its package (a Spark distribution's ``SPARK_HOME/python/lib``) stays.

    >>> site = "/venv/site-packages"
    >>> lib = site + "/pyspark/python/lib"
    >>> zips = [lib + "/pyspark.zip", lib + "/py4j-0.10.9.9-src.zip"]
    >>> installed = {site + "/pyspark", site + "/py4j"}
    >>> without_bundled_zips([*zips, "/job", site], installed.__contains__)
    ['/job', '/venv/site-packages']
    >>> without_bundled_zips(["/opt/spark/python/lib/pyspark.zip", site], set().__contains__)
    ['/opt/spark/python/lib/pyspark.zip', '/venv/site-packages']
    """
    plain = [entry for entry in path if not entry.endswith(".zip")]
    kept = []
    for entry in path:
        name = os.path.basename(entry)
        package = next((p for z, p in _BUNDLED.items() if name.startswith(z)), None)
        if (
            package is not None
            and name.endswith(".zip")
            and any(is_package(os.path.join(d or ".", package)) for d in plain)
        ):
            continue
        kept.append(entry)
    return kept


def preload() -> list[str]:
    """Import the worker's modules; the names of those imported."""
    done = []
    for name in PRELOADED:
        importlib.import_module(name)
        done.append(name)
    for name in OPTIONAL:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if found:
            importlib.import_module(name)
            done.append(name)
    return done


_FLUSH_FAILED = "PySpark daemon failed to flush the output to the worker process:"


class QuietBrokenPipe:
    r"""``stream`` without PySpark's report of a broken pipe on a worker's last flush.

    >>> import io
    >>> out = io.StringIO()
    >>> quiet = QuietBrokenPipe(out)
    >>> _ = quiet.write(_FLUSH_FAILED + "\nTraceback ...\nBrokenPipeError: [Errno 32]\n")
    >>> _ = quiet.write("\n")  # print's end
    >>> _ = quiet.write(_FLUSH_FAILED + "\nTraceback ...\nOSError: [Errno 5] I/O error\n")
    >>> _ = quiet.write("a user's line\n")
    >>> text = out.getvalue()
    >>> text.count(_FLUSH_FAILED), text.startswith(_FLUSH_FAILED), text.endswith("line\n")
    (1, True, True)
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._dropped = False  # the last write was the message: ``print``'s newline follows

    def write(self, text: str) -> int:
        dropped, self._dropped = self._dropped, False
        if text.startswith(_FLUSH_FAILED) and "BrokenPipeError" in text:
            self._dropped = True
            return len(text)
        if dropped and text == "\n":
            return 1
        return int(self._stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def quiet_worker(worker: Callable[..., int]) -> Callable[..., int]:
    """``pyspark.daemon.worker`` whose forked process says nothing of a socket the JVM closed.

    Spark 4 re-raises the failed last flush (``spark.python.daemon.killWorkerOnFlushFailure``,
    on by default), and the forked child prints it with ``traceback.print_exc()`` in several
    writes: here a ``BrokenPipeError`` ends the worker with code 1 instead (the child then
    waits for the socket to close and exits, as for any failed worker); with the option off,
    ``QuietBrokenPipe`` drops the message PySpark prints.
    """

    def run(*args: Any) -> int:
        sys.stderr = QuietBrokenPipe(sys.stderr)  # a forked worker's own process
        try:
            return worker(*args)
        except BrokenPipeError:
            return 1

    return run


if __name__ == "__main__":
    sys.path[:] = without_bundled_zips(sys.path)
    preload()
    import pyspark.daemon

    pyspark.daemon.worker = quiet_worker(pyspark.daemon.worker)  # manager() calls it by name
    pyspark.daemon.manager()
