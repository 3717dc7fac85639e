"""What a built-in scalar function is: ``BuiltinFunction``, its type rules and its examples.

Invariant: a ``BuiltinFunction`` is a plain, immutable value that states everything the
planner needs to know about one of Flink's built-in functions — the name its calls carry in
expression trees (``split_index``), its SQL names, how many arguments it takes and of which
kinds, its result type as a pure function of its arguments' types, the Python function the
generated code calls, and at least one example with Flink's documented result. Nothing here
resolves names or generates code: ``registry`` indexes the values, and the SQL converter, the
DSL, the analyzer and the code generator look them up there.

Flink's NULL rule holds unless a function says otherwise (``strict=False``): a NULL argument
gives a NULL result, without calling the implementation, and the result is nullable exactly
when an argument is.

>>> f = BuiltinFunction("upper", ("UPPER",), "UPPER(string)", "The string in upper case.",
...     "string", returns(lambda n: DataTypes.STRING(n)), str.upper, inputs="s",
...     examples=(("UPPER('hi')", "HI"),))
>>> str(f.result_type([DataTypes.STRING(False)])), str(f.result_type([DataTypes.STRING()]))
('STRING NOT NULL', 'STRING')
>>> f.check_arguments([DataTypes.INT()])
'argument 1 must be a character string, got <INT>'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.table.types import DataType, DataTypes

__all__ = [
    "BuiltinFunction",
    "TypeRule",
    "always_nullable",
    "common_of",
    "returns",
    "same_as",
    "strict",
]

#: A result type from the arguments' types.
TypeRule = Callable[[Sequence[DataType]], DataType]

_TEMPORAL = ("DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ")
_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")

#: Argument kinds, one letter each in ``BuiltinFunction.inputs``.
KINDS: dict[str, tuple[str, Callable[[DataType], bool]]] = {
    "s": ("a character string", lambda t: t.is_string),
    "n": ("a number", lambda t: t.is_numeric),
    "i": ("an integer", lambda t: t.root in _INTEGRAL),
    "b": ("a BOOLEAN", lambda t: t.root == "BOOLEAN"),
    "t": ("a DATE, TIME or TIMESTAMP", lambda t: t.root in _TEMPORAL),
    "p": ("a TIMESTAMP", lambda t: t.root in ("TIMESTAMP", "TIMESTAMP_LTZ")),
    "d": ("a DATE or TIMESTAMP", lambda t: t.root in ("DATE", "TIMESTAMP", "TIMESTAMP_LTZ")),
    "a": ("an ARRAY", lambda t: t.root == "ARRAY"),
    "m": ("a MAP", lambda t: t.root == "MAP"),
    "c": ("an ARRAY or a MAP", lambda t: t.root in ("ARRAY", "MAP", "MULTISET")),
    "y": ("a BYTES or character string", lambda t: t.is_string or t.root == "VARBINARY"),
    "x": ("a number or character string", lambda t: t.is_numeric or t.is_string),
    "*": ("any value", lambda t: True),
}


def _any_nullable(types: Sequence[DataType]) -> bool:
    return any(t.nullable for t in types)


def returns(make: Callable[[bool], DataType]) -> TypeRule:
    """A fixed result type, nullable when an argument is (``make(nullable)`` builds it)."""
    return lambda types: make(_any_nullable(types))


def always_nullable(make: Callable[[bool], DataType]) -> TypeRule:
    """A fixed result type that is NULL for some non-NULL arguments (a failed parse, an
    index out of range), so always nullable."""
    return lambda types: make(True)


def same_as(position: int, nullable: bool | None = None) -> TypeRule:
    """The type of argument ``position``; nullable when an argument is (or as given)."""

    def rule(types: Sequence[DataType]) -> DataType:
        t = types[position] if position < len(types) else DataTypes.NULL()
        n = _any_nullable(types) if nullable is None else nullable
        return t.nullable_() if n else t.not_null()

    return rule


def common_of(
    widen: Callable[[DataType, DataType], DataType], nullable: bool | None = None
) -> TypeRule:
    """The arguments' common type (``widen`` folds two); nullable when an argument is (or
    as given)."""

    def rule(types: Sequence[DataType]) -> DataType:
        known = [t for t in types if t.root != "NULL"] or list(types)
        common = known[0]
        for t in known[1:]:
            common = widen(common, t)
        n = _any_nullable(types) if nullable is None else nullable
        return common.nullable_() if n else common.not_null()

    return rule


def strict(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` behind Flink's NULL rule: NULL when an argument is NULL, else ``f(*args)``.

    >>> strict(max)(1, None), strict(max)(1, 2)
    (None, 2)
    """

    def null_in_null_out(*args: Any) -> Any:
        for a in args:
            if a is None:
                return None
        return f(*args)

    null_in_null_out.__name__ = getattr(f, "__name__", "function")
    return null_in_null_out


@dataclass(frozen=True)
class BuiltinFunction:
    """One built-in scalar function.

    ``name`` is its name in expression trees (a call's ``name``, a ``Rex``'s ``op``);
    ``sql_names`` the names SQL calls it by (the first is the one documented, ``()`` for one
    with syntax only, as ``||``); ``signature`` and ``description`` document it;
    ``implementation`` is the Python function generated code calls (``None``: the code
    generator writes it inline, as the operators); ``inputs`` the kind of each argument, one
    letter of ``KINDS`` per position, a trailing ``+`` repeating the last; ``arity`` the
    smallest and largest argument count (``None``: no limit); ``method`` PyFlink's
    ``Expression`` attribute for it (``property`` when it takes no arguments besides the
    expression itself); ``examples`` pairs of SQL expression text and Flink's result;
    ``literal_arguments`` the positions that must be literals (a unit, a JSON path);
    ``coerce_arguments``: each numeric argument is cast to the result's type first.
    """

    name: str
    sql_names: tuple[str, ...]
    signature: str
    description: str
    family: str
    result: TypeRule
    implementation: Callable[..., Any] | None
    inputs: str = ""
    arity: tuple[int, int | None] | None = None
    examples: tuple[tuple[str, Any], ...] = ()
    method: str | None = None
    method_is_property: bool = False
    strict: bool = True
    deterministic: bool = True
    literal_arguments: tuple[int, ...] = ()
    coerce_arguments: bool = False

    @property
    def min_args(self) -> int:
        if self.arity is not None:
            return self.arity[0]
        return len(self.inputs.rstrip("+"))

    @property
    def max_args(self) -> int | None:
        if self.arity is not None:
            return self.arity[1]
        return None if self.inputs.endswith("+") else len(self.inputs)

    def accepts(self, count: int) -> bool:
        """Whether ``count`` arguments are allowed."""
        top = self.max_args
        return self.min_args <= count and (top is None or count <= top)

    def check_arguments(self, types: Sequence[DataType]) -> str | None:
        """Why these argument types do not fit (``None``: they do; NULL fits anything)."""
        kinds = self.inputs.rstrip("+")
        for i, t in enumerate(types):
            if not kinds:
                break
            kind = kinds[i] if i < len(kinds) else (kinds[-1] if self.inputs.endswith("+") else "*")
            what, fits = KINDS[kind]
            if t.root != "NULL" and not fits(t):
                return f"argument {i + 1} must be {what}, got <{t}>"
        return None

    def result_type(self, types: Sequence[DataType]) -> DataType:
        return self.result(types)
