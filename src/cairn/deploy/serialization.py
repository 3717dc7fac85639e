"""Serialize a job for shipment to workers.

Invariant: user code defined outside installed packages (job scripts, test modules, notebook
cells) is pickled by value, so workers need only Cairn and the user's installed libraries.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import ModuleType
from typing import Any

import cloudpickle

_INSTALLED_ROOTS = tuple(
    os.path.realpath(p)
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _is_user_module(module: ModuleType) -> bool:
    name = module.__name__
    if name == "__main__" or name.split(".")[0] in ("cairn", "pyspark", "py4j", "cloudpickle"):
        return False
    if name in sys.stdlib_module_names or name.split(".")[0] in sys.stdlib_module_names:
        return False
    path = getattr(module, "__file__", None)
    if not path:
        return False
    real = os.path.realpath(path)
    return not real.startswith(_INSTALLED_ROOTS)


def dumps_job(obj: Any) -> bytes:
    registered = []
    for module in list(sys.modules.values()):
        if module is None or not isinstance(module, ModuleType):
            continue
        try:
            if _is_user_module(module):
                cloudpickle.register_pickle_by_value(module)
                registered.append(module)
        except (ValueError, TypeError):
            continue
    try:
        return cloudpickle.dumps(obj, protocol=5)
    finally:
        for module in registered:
            try:
                cloudpickle.unregister_pickle_by_value(module)
            except ValueError:
                pass
