"""The examples in the state layer's docstrings run and stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "cairn.common.time",
    "cairn.datastream.connectors.datagen",
    "cairn.datastream.state",
    "cairn.state.heap_backend",
    "cairn.state.key_groups",
    "cairn.state.operator_state",
    "cairn.state.timers",
    "cairn.testing.state_files",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
