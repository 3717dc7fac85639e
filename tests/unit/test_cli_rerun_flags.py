"""``cairn run --fresh / --resume / --refuse-resume``: what they set, and that they exclude
each other and are refused after the script like cairn's other options."""

from __future__ import annotations

import pytest

from cairn.cli.main import _misplaced_run_options, build_parser
from cairn.common.config_options import validate_configuration


@pytest.mark.parametrize(
    ("flag", "policy"),
    [("--fresh", "FRESH"), ("--resume", "FORCE_RESUME"), ("--refuse-resume", "REFUSE")],
)
def test_each_flag_sets_the_on_rerun_option(flag: str, policy: str) -> None:
    args = build_parser().parse_args(["run", flag, "job.py"])
    assert args.on_rerun == policy
    resolved = validate_configuration({"cairn.recovery.on-rerun": args.on_rerun})
    assert resolved["cairn.recovery.on-rerun"] == policy


def test_without_a_flag_the_configuration_decides() -> None:
    assert build_parser().parse_args(["run", "job.py"]).on_rerun is None


def test_the_flags_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--fresh", "--resume", "job.py"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_flag_after_the_script_is_cairns_not_the_scripts() -> None:
    assert _misplaced_run_options(["--fresh", "--out", "x"]) == (["--fresh"], ["--out", "x"])
