"""How a built-in option is defined: ``define`` registers it, the checks state its range.

Invariant: defining an option registers it in ``config_registry`` at import time (defining the
same option twice is a no-op, a different one under a taken key or alias raises); a check
returns a description of the problem, or None, and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.common.config_registry import Check, ConfigOption, register_option
from cairn.common.filesystems import filesystem_url_problem

MS = " ms"  # the unit in messages of duration checks


def at_least(minimum: float, what: str, unit: str = "") -> Check:
    def check(v: Any) -> str | None:
        return f"{what} must be at least {minimum}{unit}, got {v}{unit}" if v < minimum else None

    return check


def between(low: float, high: float, what: str) -> Check:
    def check(v: Any) -> str | None:
        return f"{what} must be between {low} and {high}, got {v}" if not low <= v <= high else None

    return check


def non_empty(v: Any) -> str | None:
    return "must not be empty" if not v else None


def filesystem_url(v: Any) -> str | None:
    return non_empty(v) or filesystem_url_problem(str(v))


def max_parallelism(v: Any) -> str | None:
    if v == -1 or 1 <= v <= 32768:
        return None
    return f"max parallelism must be between 1 and 32768 (or -1 for automatic), got {v}"


def positive(v: Any) -> str | None:
    return None if v >= 1 else f"must be >= 1, got {v}"


def define(
    key: str,
    kind: str,
    default: Any,
    description: str,
    *aliases: str,
    choices: Mapping[str, str] | None = None,
    check: Check | None = None,
    secret: bool = False,
) -> ConfigOption:
    """Register the option ``key`` (``aliases``: its deprecated names) and return it."""
    return register_option(
        ConfigOption(
            key, kind, default, description, tuple(aliases), dict(choices or {}), check, secret
        )
    )


def spellings(*groups: tuple[str, ...]) -> dict[str, str]:
    """``("none", "off")`` -> ``{"none": "none", "off": "none"}``: first spelling is canonical."""
    return {s.lower(): group[0] for group in groups for s in group}
