"""Options the ``cairn`` commands that run jobs share (``cairn run``, ``cairn sql``):
``-p``, ``--master``, ``--executor`` and ``-D KEY=VALUE`` configuration items; the
signing key of the commands that read checkpoints (``--signing-key-file``).

Invariant: parsing is pure: an item's text becomes one configuration entry (the first ``=``
splits key and value, both stripped), later items win.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.settings import SigningKey

__all__ = ["add_job_options", "parse_conf_items", "signing_key_from_file"]


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


def signing_key_from_file(key_file: str | None) -> SigningKey | None:
    """The key of ``--signing-key-file``, else of ``CAIRN_CHECKPOINT_SIGNING_KEY``, else None
    (a key on the command line would be visible to every local user in the process list)."""
    from cairn.common.exceptions import ConfigurationError
    from cairn.datastream.job_builder import signing_key_from_environ
    from cairn.settings import SigningKey

    if key_file is None:
        return signing_key_from_environ(os.environ)
    try:
        with open(key_file, encoding="utf-8") as f:
            return SigningKey.parse(f.read())
    except OSError as e:
        raise ConfigurationError(f"--signing-key-file: cannot read {key_file}: {e}") from None
    except ValueError as e:
        raise ConfigurationError(f"--signing-key-file {key_file}: {e}") from None
