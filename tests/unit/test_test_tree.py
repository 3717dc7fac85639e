"""The test tree's own rules: no module under ``tests/`` imports a test module (``test_*``),
and a module that is neither a test module nor a ``conftest.py`` is a helper named ``_*.py``.

Helpers that several test modules share live in helper modules (``tests/unit/_*.py``,
``tests/integration/_*.py``, and the older ``jobs.py``, ``waits.py``, ...), which pytest does
not collect. A test module that imports another couples the two (renaming a test or a fixture
breaks the other) and runs the imported module's code, fixtures and marks where no one looks
for them.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Helper modules named before the ``_`` rule (docs/testing.md); new helpers start with ``_``.
UNPREFIXED_HELPERS = frozenset(
    {
        "connection_flood.py",
        "integration/async_jobs.py",
        "integration/drain_job.py",
        "integration/driver_loss_job.py",
        "integration/event_time_jobs.py",
        "integration/ha_job.py",
        "integration/jdbc_jobs.py",
        "integration/jobs.py",
        "integration/kafka_jobs.py",
        "integration/kafka_sink_jobs.py",
        "integration/rest_calls.py",
        "integration/savepoint_job.py",
        "integration/skew_table.py",
        "integration/two_input_jobs.py",
        "integration/waits.py",
        "integration/window_jobs.py",
        "unit/batch_jobs.py",
        "unit/state_backends.py",
    }
)


def _ours(module: str) -> bool:
    """A module of the test tree: ``tests...`` or relative (``.x``)."""
    return module.startswith(".") or module.split(".")[0] == "tests"


def _is_test_module(module: str) -> bool:
    return _ours(module) and any(part.startswith("test_") for part in module.split("."))


def imported_test_modules(source: str) -> list[str]:
    """The test tree's ``test_*`` modules ``source`` imports, as written (``.test_x``,
    ``tests.unit.test_x``, ``from tests.unit import test_x``, ``from . import test_x``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if _is_test_module(module):
                found.append(module)
            elif _ours(module):  # names imported from a package may be modules
                found += [
                    module + ("" if module.endswith(".") else ".") + alias.name
                    for alias in node.names
                    if alias.name.startswith("test_")
                ]
    return found


def test_no_module_of_the_test_tree_imports_a_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert not offenders, (
        "test modules import other test modules; move what they share into a helper module "
        f"(tests/unit/_*.py, tests/integration/_*.py) and import it from there: {offenders}"
    )


def test_the_check_finds_every_form_of_import_and_nothing_else() -> None:
    sources = {
        "from .test_eventtime_operators import Harness": [".test_eventtime_operators"],
        "from tests.unit.test_state_snapshot import FULL": ["tests.unit.test_state_snapshot"],
        "from tests.unit import test_state_snapshot as suite": ["tests.unit.test_state_snapshot"],
        "from . import test_window_operator": [".test_window_operator"],
        "from .. import test_tiers": ["..test_tiers"],
        "import tests.integration.test_metrics": ["tests.integration.test_metrics"],
        "def f():\n    from .test_batch_mode import _Endless": [".test_batch_mode"],
        "from ._operator_harness import OperatorHarness": [],
        "from tests.integration.jobs import sequence_job": [],
        "from aiohttp.test_utils import TestServer": [],
    }
    found = {source: imported_test_modules(source) for source in sources}
    assert found == sources


def test_helper_modules_start_with_an_underscore() -> None:
    unprefixed = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("*.py")
        if not path.name.startswith(("test_", "_")) and path.name != "conftest.py"
    }
    assert unprefixed - UNPREFIXED_HELPERS == set(), "name helper modules _*.py"
    assert UNPREFIXED_HELPERS - unprefixed == set(), "gone or renamed: drop from the list"
