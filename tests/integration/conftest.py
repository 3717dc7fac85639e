"""Fixtures shared by the integration tests; plain helpers live in ``tests/integration/*.py``
modules without the ``test_`` prefix (``jobs.py`` builds jobs, ``waits.py`` waits on them).

- ``registry_dir``: this test's own job registry. ``TMPDIR`` (inherited by every process the
  test starts) and ``tempfile.tempdir`` point at ``tmp_path``, so the jobs, clients and CLI
  calls of the test see only its jobs; the value is the registry's directory
  (``<TMPDIR>/cairn-jobs-<uid>``). Modules whose every test needs it use
  ``pytestmark = pytest.mark.usefixtures("registry_dir")``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cairn.rest.registry import JobRegistry


@pytest.fixture
def registry_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The registry every job and client of the test uses (``<TMPDIR>/cairn-jobs-<uid>``)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return JobRegistry().directory
