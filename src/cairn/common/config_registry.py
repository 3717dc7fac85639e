"""The configuration option registry: ``ConfigOption``, registration, lookup and parsing.

Invariant: a key is either registered (with its type, default and deprecated aliases) or starts
with a pass-through prefix; anything else is rejected with a suggestion. Values are parsed by
their option only, so a key means the same thing wherever it is set. The built-in options are
defined in ``cairn.common.config_options``, which is the module to import.

>>> opt = ConfigOption("example.retries", "int", 3, "Retries.", ("example.old-retries",))
>>> opt.parse("5"), opt.format(7)
(5, '7')
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.common import config_values as cv
from cairn.common.exceptions import ConfigurationError

__all__ = [
    "ConfigOption",
    "all_options",
    "canonical_key",
    "format_value",
    "get_option",
    "is_passthrough",
    "is_secret",
    "parse_value",
    "register_option",
    "register_passthrough_prefix",
    "validate_configuration",
]

Check = Callable[[Any], str | None]  # returns a description of the problem, or None


@dataclass(frozen=True)
class ConfigOption:
    """One configuration key.

    ``kind`` is ``"duration"`` (parsed to milliseconds), ``"memory"`` (parsed to bytes),
    ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"map"`` or ``"enum"`` (``choices`` maps
    accepted lower-case spellings to the canonical value). ``check`` adds a range rule on the
    parsed value. A ``secret`` value (e.g. a signing key) is never echoed in errors nor kept
    in a job's configuration record.
    """

    key: str
    kind: str
    default: Any
    description: str
    deprecated_keys: tuple[str, ...] = ()
    choices: Mapping[str, str] = field(default_factory=dict)
    check: Check | None = None
    secret: bool = False

    def parse(self, value: Any) -> Any:
        """The canonical Python value; ``ValueError`` describes what is expected."""
        parsed = self._parse_kind(value)
        problem = self.check(parsed) if self.check is not None else None
        if problem:
            raise ValueError(problem)
        return parsed

    def format(self, value: Any) -> str:
        """The textual form of a value (inverse of ``parse``)."""
        parsed = self.parse(value)
        if self.kind == "duration":
            return cv.format_duration_ms(parsed)
        if self.kind == "memory":
            return cv.format_memory_bytes(parsed)
        if self.kind == "bool":
            return cv.format_bool(parsed)
        if self.kind == "map":
            return cv.format_map(parsed)
        return str(parsed)

    def _parse_kind(self, value: Any) -> Any:
        if self.kind == "duration":
            return cv.parse_duration_ms(value)
        if self.kind == "memory":
            return cv.parse_memory_bytes(value)
        if self.kind == "int":
            return cv.parse_int(value)
        if self.kind == "float":
            return cv.parse_float(value)
        if self.kind == "bool":
            return cv.parse_bool(value)
        if self.kind == "map":
            return cv.parse_map(value)
        if self.kind == "enum":
            # Enum members (CheckpointingMode.EXACTLY_ONCE...) are given by their name.
            text = getattr(value, "name", value)
            if isinstance(text, str) and text.strip().lower() in self.choices:
                return self.choices[text.strip().lower()]
            allowed = sorted(set(self.choices.values()))
            raise ValueError("expected one of " + ", ".join(repr(a) for a in allowed))
        if self.kind == "str":
            if isinstance(value, str):
                return value.strip()
            raise ValueError("expected a string")
        raise ValueError(f"option {self.key!r} has unknown kind {self.kind!r}")


_OPTIONS: dict[str, ConfigOption] = {}
_ALIASES: dict[str, str] = {}
_PASSTHROUGH: dict[str, str] = {}  # prefix -> description
_SECRET_PREFIXES: set[str] = set()  # pass-through prefixes whose values are secrets


def register_option(option: ConfigOption) -> ConfigOption:
    """Add a key (other layers call this at import time). Re-registering the same option is a
    no-op; a different option under a taken key or alias raises ``ValueError``."""
    taken = _OPTIONS.get(option.key)
    if taken is not None:
        if taken == option:
            return taken
        raise ValueError(f"configuration option {option.key!r} is already registered")
    for key in (option.key, *option.deprecated_keys):
        if key in _ALIASES or (key != option.key and key in _OPTIONS):
            raise ValueError(f"configuration key {key!r} is already registered")
    if option.kind == "enum" and not option.choices:
        raise ValueError(f"enum option {option.key!r} needs choices")
    _OPTIONS[option.key] = option
    for alias in option.deprecated_keys:
        _ALIASES[alias] = option.key
    return option


def register_passthrough_prefix(prefix: str, description: str, *, secret: bool = False) -> None:
    """Accept every key under ``prefix`` unvalidated (e.g. ``spark.`` for Spark's settings);
    ``secret``: their values are secrets (account keys), never recorded."""
    if not prefix.endswith("."):
        raise ValueError(f"pass-through prefix must end with '.', got {prefix!r}")
    _PASSTHROUGH[prefix] = description
    if secret:
        _SECRET_PREFIXES.add(prefix)


def is_passthrough(key: str) -> bool:
    return any(key.startswith(p) and len(key) > len(p) for p in _PASSTHROUGH)


def is_secret(key: str) -> bool:
    """Whether the value of the (canonical or pass-through) ``key`` is a secret."""
    if is_passthrough(key):
        return any(key.startswith(p) for p in _SECRET_PREFIXES)
    option = _OPTIONS.get(_ALIASES.get(key, key))
    return option is not None and option.secret


def all_options() -> list[ConfigOption]:
    return sorted(_OPTIONS.values(), key=lambda o: o.key)


def get_option(key: str) -> ConfigOption:
    """The option registered under ``key`` or one of its deprecated aliases."""
    option = _OPTIONS.get(_ALIASES.get(key, key))
    if option is None:
        raise ConfigurationError(_unknown_key_message(key))
    return option


def canonical_key(key: str) -> str:
    """The current name of ``key`` (pass-through keys are returned unchanged)."""
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"configuration keys must be non-empty strings, got {key!r}")
    if is_passthrough(key):
        return key
    return get_option(key).key


def parse_value(key: str, value: Any) -> tuple[str, Any]:
    """``(canonical key, parsed value)``; pass-through values are kept as strings."""
    canonical = canonical_key(key)
    if is_passthrough(canonical):
        return canonical, str(value)
    option = _OPTIONS[canonical]
    try:
        return canonical, option.parse(value)
    except ValueError as exc:
        raise ConfigurationError(_bad_value_message(key, canonical, value, exc)) from None


def format_value(key: str, value: Any) -> tuple[str, str]:
    """``(canonical key, textual value)`` after validating ``value`` for ``key``."""
    canonical = canonical_key(key)
    if is_passthrough(canonical):
        return canonical, str(value)
    try:
        return canonical, _OPTIONS[canonical].format(value)
    except ValueError as exc:
        raise ConfigurationError(_bad_value_message(key, canonical, value, exc)) from None


def validate_configuration(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Parse every entry; returns canonical key -> parsed value.

    When a deprecated key and its current name are both present, the current name wins (as in
    Flink).
    """
    result: dict[str, Any] = {}
    from_current: set[str] = set()
    for key, value in raw.items():
        canonical, parsed = parse_value(key, value)
        if canonical in from_current and key != canonical:
            continue
        result[canonical] = parsed
        if key == canonical:
            from_current.add(canonical)
    return result


def _unknown_key_message(key: str) -> str:
    known: Iterable[str] = [*_OPTIONS, *_ALIASES]
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    message = f"unknown configuration option {key!r}"
    if close:
        message += f"; did you mean {_ALIASES.get(close[0], close[0])!r}?"
    else:
        prefixes = ", ".join(repr(p + "*") for p in sorted(_PASSTHROUGH))
        message += f" (keys under {prefixes} are passed through unvalidated)"
    return message


def _bad_value_message(key: str, canonical: str, value: Any, exc: ValueError) -> str:
    name = repr(key) if key == canonical else f"{key!r} (deprecated name of {canonical!r})"
    shown = "(secret, not shown)" if _OPTIONS[canonical].secret else repr(value)
    return f"invalid value {shown} for configuration option {name}: {exc}"
