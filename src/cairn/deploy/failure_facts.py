"""Where a task's failure happened in the user's code, read from the exception on the worker
before its traceback is gone: the operator that raised, the user's own frames, the record.

Invariant: the facts are plain values (strings and ints) that pickle anywhere; reading them
never raises (an unreadable part is left out), and a record is at most ``RECORD_CHARS``
characters of its ``repr``. A frame is the user's when its file is not Cairn's, PySpark's,
py4j's, cloudpickle's, another installed package's or the standard library's (nor
``<frozen ...>``/``<string>``).

>>> _is_user_file("/home/me/job.py", _library_roots())
True
>>> _is_user_file(traceback.__file__, _library_roots())
False
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from dataclasses import dataclass
from types import FrameType

__all__ = ["RECORD_CHARS", "FailureFacts", "UserFrame", "facts_of"]

RECORD_CHARS = 160
_MAX_FRAMES = 6


@dataclass(frozen=True)
class UserFrame:
    """One frame of the user's code: ``file:line in function`` and its source line."""

    file: str
    line: int
    function: str
    code: str


@dataclass(frozen=True)
class FailureFacts:
    """The operator (``name (uid u)``) that raised, the user's frames (outermost first, at
    most ``_MAX_FRAMES``, the innermost kept) and the record its function was given."""

    operator: str | None = None
    user_frames: tuple[UserFrame, ...] = ()
    record: str | None = None


def _library_roots() -> tuple[str, ...]:
    roots = []
    for module in ("cairn", "pyspark", "py4j", "cloudpickle"):
        try:
            spec = __import__(module)
        except ImportError:
            continue
        path = getattr(spec, "__file__", None)
        if path:
            roots.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.append(os.path.abspath(path) + os.sep)
    return tuple(roots)


def _is_user_file(path: str, roots: tuple[str, ...]) -> bool:
    if path.startswith("<"):  # <frozen runpy>, <string>
        return False
    full = os.path.abspath(path)
    if "site-packages" + os.sep in full and not any(full.startswith(r) for r in roots):
        # Another installed library is the user's dependency, not their code, unless it
        # is all there is (then the user's frames below are empty and it shows instead).
        return False
    return not full.startswith(roots)


def _argument(frame: FrameType) -> str | None:
    """``repr`` of the first argument of ``frame``'s function other than ``self``/``cls``
    (None for a comprehension's frame: its argument is an iterator)."""
    code = frame.f_code
    if code.co_name.startswith("<") and code.co_name != "<lambda>":
        return None
    for name in code.co_varnames[: code.co_argcount]:
        if name in ("self", "cls"):
            continue
        if name not in frame.f_locals:
            return None
        try:
            text = repr(frame.f_locals[name])
        except Exception:
            return None
        return text if len(text) <= RECORD_CHARS else text[: RECORD_CHARS - 3] + "..."
    return None


def facts_of(exc: BaseException) -> FailureFacts:
    """What ``exc``'s traceback says about where in the user's code it was raised."""
    try:
        from cairn.runtime.operators.base import StreamOperator

        roots = _library_roots()
        frames = list(traceback.walk_tb(exc.__traceback__))
        operator = None
        called: list[FrameType] = []  # user frames below the innermost operator
        user: list[tuple[FrameType, int]] = []
        for frame, line in frames:
            owner = frame.f_locals.get("self")
            if isinstance(owner, StreamOperator):
                operator = f"{owner.name} (uid {owner.uid})"
                called = []
            elif _is_user_file(frame.f_code.co_filename, roots):
                called.append(frame)
            if _is_user_file(frame.f_code.co_filename, roots):
                user.append((frame, line))
        record = next(filter(None, map(_argument, called)), None)
        shown = user[-_MAX_FRAMES:]
        cache = traceback.StackSummary.extract(
            ((f, n) for f, n in shown), lookup_lines=True, capture_locals=False
        )
        user_frames = tuple(
            UserFrame(s.filename, s.lineno or 0, s.name, (s.line or "").strip()) for s in cache
        )
        return FailureFacts(operator, user_frames, record)
    except Exception:  # the facts are a courtesy: never fail the failure report
        return FailureFacts()
