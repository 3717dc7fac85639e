"""The examples in the control endpoint's and the savepoint protocol's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "cairn.rest.views",
    "cairn.rest.registry",
    "cairn.checkpoint.protocol",
    "cairn.checkpoint.errors",
    "cairn.datastream.job_builder",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
