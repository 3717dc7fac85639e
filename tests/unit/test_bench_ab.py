"""``bench.ab`` runs each checkout's own ``cairn``: every checkout, with or without a venv of
its own, gets its ``src`` first on ``PYTHONPATH`` with the same Python, and a side that would
import another checkout's ``cairn`` is refused (before, such an A/B silently compared the main
checkout with itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench.ab import check_imports_its_own_cairn, checkout_command


def _checkout(root: Path, with_cairn: bool) -> Path:
    (root / "src").mkdir(parents=True)
    if with_cairn:
        (root / "src" / "cairn").mkdir()
        (root / "src" / "cairn" / "__init__.py").write_text("")
    return root


def test_a_checkout_without_a_venv_runs_its_own_src(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "before", with_cairn=True)
    python, env = checkout_command(checkout)
    assert python == sys.executable
    assert env["PYTHONPATH"].split(":")[0] == str(checkout / "src")
    check_imports_its_own_cairn(checkout)  # imports tmp_path/before/src/cairn: accepted


def test_a_checkout_with_its_own_venv_runs_the_same_way(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "main", with_cairn=True)
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").symlink_to(sys.executable)
    python, env = checkout_command(checkout)
    assert python == sys.executable  # not the checkout's venv: both sides alike
    assert env["PYTHONPATH"].split(":")[0] == str(checkout / "src")
    check_imports_its_own_cairn(checkout)


def test_a_checkout_whose_command_imports_another_cairn_is_refused(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "empty", with_cairn=False)  # falls through to main's
    with pytest.raises(SystemExit, match=r"would run the cairn of .*, not its own"):
        check_imports_its_own_cairn(checkout)
