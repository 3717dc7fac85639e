"""Serialize a job for shipment to workers.

Invariant: user code defined outside installed packages (job scripts, test modules, notebook
cells) is pickled by value, so workers need only Cairn and the user's installed libraries;
code pickled by value keeps its file name, so a worker's traceback points at the user's file.
"""

from __future__ import annotations

import io
import os
import sys
import sysconfig
import types
from collections import ChainMap
from types import ModuleType
from typing import Any

import cloudpickle
from cloudpickle import cloudpickle as _cloudpickle_impl

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


def _code_reduce_keeping_filename(code: types.CodeType) -> Any:
    # cloudpickle >= 3.1.3 writes "<dynamic-code>" as every file name (deterministic
    # payloads); users need their own file and line in a worker's traceback.
    # cloudpickle has no public reducer for code objects (allowlisted, issue 34).
    constructor, args = _cloudpickle_impl._code_reduce(code)
    args = tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)
    return constructor, args


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle has no type hints
    dispatch_table = ChainMap(
        {types.CodeType: _code_reduce_keeping_filename}, cloudpickle.Pickler.dispatch_table
    )


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj, protocol=5)``, keeping the file names of pickled code.

    >>> import pickle
    >>> def f(): return 1
    >>> pickle.loads(dumps(f)).__code__.co_filename == f.__code__.co_filename
    True
    """
    with io.BytesIO() as buffer:
        _Pickler(buffer, protocol=5).dump(obj)
        return buffer.getvalue()


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
        return dumps(obj)
    finally:
        for module in registered:
            try:
                cloudpickle.unregister_pickle_by_value(module)
            except ValueError:
                pass
