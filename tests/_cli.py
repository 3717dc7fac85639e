"""``cairn ...`` run in the test's own process.

Invariant: whatever the command changes process-wide (``sys.argv``, ``sys.path``, the
environment's context defaults, as ``cairn run`` and ``cairn chaos`` do when they run a
user's script) is undone when it returns or raises.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cairn.cli.main import main
from cairn.datastream.stream_execution_environment import reset_context_defaults


def cli_in_process(argv: Sequence[str]) -> int:
    """The exit status of ``cairn <argv>``, run here."""
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    try:
        return main(list(argv))
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        reset_context_defaults()
