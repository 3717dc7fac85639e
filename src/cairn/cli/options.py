"""Options the ``cairn`` commands that run jobs share (``cairn run``, ``cairn sql``):
``-p``, ``--master``, ``--executor`` and ``-D KEY=VALUE`` configuration items.

Invariant: pure: an item's text becomes one configuration entry (the first ``=`` splits key
and value, both stripped), later items win.
"""

from __future__ import annotations

import argparse

__all__ = ["add_job_options", "parse_conf_items"]


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """``-p``, ``--master``, ``--executor`` and ``-D`` on a job-running command."""
    parser.add_argument("-p", "--parallelism", type=int, default=None)
    parser.add_argument("--master", default=None, help="Spark master URL (default: local)")
    parser.add_argument("--executor", choices=["spark", "inprocess"], default=None)
    parser.add_argument(
        "-D",
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="configuration option, e.g. -D execution.checkpointing.interval=1s",
    )


def parse_conf_items(items: list[str] | None) -> dict[str, str]:
    """``-D KEY=VALUE`` options as a dict (later ones win).

    >>> parse_conf_items(["s3.endpoint = http://127.0.0.1:8333", "a=b=c"])
    {'s3.endpoint': 'http://127.0.0.1:8333', 'a': 'b=c'}
    """
    conf: dict[str, str] = {}
    for item in items or []:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    return conf
