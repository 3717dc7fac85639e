"""``cairn checkpoints`` and ``cairn demo`` report configuration errors like ``cairn run``: one
line ``cairn <command>: <what is wrong>``, exit status 1, the traceback only with ``-v``; the
demo checks its options before it starts Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err.splitlines()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["checkpoints", "foo://bucket/x"], "unknown filesystem scheme 'foo' in 'foo://bucket/x'"),
        (["checkpoints", "/nonexistent/chk-3"], "/nonexistent/chk-3: no such checkpoint"),
        (["demo", "-p", "0"], "--parallelism must be at least 1, got 0"),
        (["demo", "--rate", "0", "--no-kill"], "--rate must be at least 1, got 0"),
        (["demo", "--keys", "-3"], "--keys must be at least 1, got -3"),
        (["demo", "skew", "--seconds", "0"], "--seconds must be at least 1, got 0"),
        (["demo", "skew", "--record-cost-ms", "-1"], "--record-cost-ms must be at least 0"),
    ],
)
def test_configuration_errors_print_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, *argv)
    assert code == 1
    assert len(err) == 1 and err[0].startswith(f"cairn {argv[0]}: ") and message in err[0], err


def test_verbose_adds_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, "-v", "checkpoints", "foo://bucket/x")
    assert code == 1 and err[0] == "Traceback (most recent call last):"
    assert err[-1].startswith("cairn checkpoints: unknown filesystem scheme 'foo'")


def test_an_unknown_checkpoint_id_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit._checkpoint_dirs import ALIGNED, job

    job(tmp_path).checkpoint(ALIGNED)
    code, err = run(capsys, "checkpoints", str(tmp_path), "--id", "99")
    assert code == 1 and len(err) == 1 and "no checkpoint 99" in err[0]
