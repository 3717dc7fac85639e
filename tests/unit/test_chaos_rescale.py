"""``cairn chaos --rescale`` on the in-process executor: the docs example's planted
operator-state bug (per-key totals in a dict checkpointed as operator list state) passes
every restore at the same parallelism but loses its totals when the run is stopped with a
savepoint and restored at p+1, and the report names that cause."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests._cli import cli_in_process

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "chaos_orders.py")


def test_state_lost_after_a_rescale_is_found_and_named(tmp_path: Path, capsys: Any) -> None:
    argv = ["chaos", EXAMPLE, "--executor", "inprocess", "--faults", "2", "--seed=7"]
    argv += ["--rescale", "--work-dir", str(tmp_path), "--", "--orders", "3000"]
    argv += ["--bug", "operator-state", "--out", str(tmp_path / "totals")]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    assert status == 1, out
    assert "first difference, in Sink 'totals-file': key 'c" in out, out
    assert "likely cause: lost state after rescale: a run rescaled mid-run differs" in out, out
    assert "rescale just before: restored at p=3 from savepoint 1" in out, out
    assert "rescaled: p=2 -> 3 -> 2, each step a stop with savepoint mid-run" in out, out
    assert "--rescale" in out.split("replay: ")[1].splitlines()[0], out
    assert not (tmp_path / "totals").exists(), "the user's path was written"
