"""Spark's Python daemon (``pyspark.daemon``) with a Cairn worker's code imported before it
forks Python workers (``spark.python.daemon.module``, set for sessions Cairn creates).

Invariant: only imports happen here before ``pyspark.daemon.manager()`` takes over: no thread,
no connection, no file, nothing on stdout (Spark reads the daemon's port from it); a worker
forked from the daemon then starts without importing Cairn (and s3fs, if installed) again —
on a failover, the restarted worker's process is a new fork, so its restore starts sooner.
"""

from __future__ import annotations

import importlib
import importlib.util

# What ``deploy.executors._spark_worker_partition`` needs: the worker and everything below.
PRELOADED = ("cairn.deploy.executors", "cairn.state.rocksdb.backend")
OPTIONAL = ("s3fs",)  # checkpoint storage on S3: imported only if installed


def preload() -> list[str]:
    """Import the worker's modules; the names of those imported."""
    done = []
    for name in PRELOADED:
        importlib.import_module(name)
        done.append(name)
    for name in OPTIONAL:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
            done.append(name)
    return done


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
