"""One life of ``cairn chaos --driver-kills``'s faulted run: ``python -m
cairn.cli.chaos_driver_life SPEC RESULT`` runs the job as ``cairn chaos`` runs it in its
own process (``chaos.run_job``, label ``faults``), in a child the parent may SIGKILL.

Invariant: the spec (JSON, written by ``cli/chaos_driver.py``) names everything the run
depends on: the script and its arguments, the run's options and ``-D`` items (among them
``cairn.recovery.on-rerun: RESUME`` and this life's driver kill), the work directory and the
worker kills of this life, and in a run in segments (``--rescale``, ``--upgrade``) all of
them and the one this life begins with, from which savepoint (``chaos_driver_segments``);
so every life of one faulted run writes to the same checkpoint directory and sink places. A
life that ends writes RESULT (what the sinks committed, or the run's error; the segments it
ran, and why it stopped short of the last, if it did) and exits 0; a killed one writes
nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import sys

from cairn.cli.chaos_inputs import RATE, RECORDS, SECONDS, InputCapture
from cairn.cli.chaos_run import run_job
from cairn.cli.chaos_upgrade import UpgradeCheck
from cairn.testing.fault_plan import PlannedFault

__all__ = ["main"]


def main(argv: list[str]) -> int:
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = argparse.Namespace(**spec["args"])
    args.inputs = _inputs(spec.get("inputs", ""), spec["work"])
    plan = tuple(PlannedFault(**fields) for fields in spec["plan"])
    markers = spec.get("markers", "")
    check = _check(spec.get("check", ""))
    result = run_job(
        args,
        "faults",
        spec["work"],
        plan=plan,
        markers=markers,
        segments=spec.get("segments", [None]),
        stop_after=spec.get("stop_after", 1),
        scripts=spec.get("scripts", []),
        before_restore=check.before_restore if check is not None else None,
        first=spec.get("first", 0),
        restore=spec.get("restore"),
    )
    data = {
        "error": result.error,
        "segments_run": result.segments_run,
        "note": result.note,
        "refused": result.refused,
        "outputs": {
            name: [[r.text, r.committed_at, r.where] for r in records]
            for name, records in result.outputs.items()
        },
    }
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return 0


def _check(path: str) -> UpgradeCheck | None:
    """The parent's check of a savepoint before the upgraded script restores it."""
    if not path:
        return None
    with open(path, "rb") as f:
        check = pickle.load(f)
    assert isinstance(check, UpgradeCheck)
    return check


def _inputs(path: str, work: str) -> InputCapture:
    """The parent's captured inputs (the same records in every life), or none yet."""
    if path:
        with open(path, "rb") as f:
            inputs = pickle.load(f)
        assert isinstance(inputs, InputCapture)
        return inputs
    return InputCapture(os.path.join(work, "input"), RECORDS, SECONDS, RATE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
