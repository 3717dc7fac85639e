"""Java ``SimpleDateFormat`` / ``DateTimeFormatter`` patterns (``yyyy-MM-dd HH:mm:ss``) for
Python values: formatting a ``datetime`` and parsing text.

Invariant: a pattern is split once into fields (a run of one letter) and literals (other
characters, ``'quoted'`` text, ``''`` a quote) and cached; formatting writes each field as
Java does for the letters Flink's patterns use (``y M d H h k K m s S E a D w u z Z X``);
parsing accepts exactly what the pattern describes and raises ``ValueError`` otherwise.

>>> import datetime
>>> t = datetime.datetime(2020, 2, 3, 4, 5, 6, 789000)
>>> format_datetime(t, "yyyy-MM-dd HH:mm:ss.SSS"), format_datetime(t, "EEE, d MMM yy h a")
('2020-02-03 04:05:06.789', 'Mon, 3 Feb 20 4 AM')
>>> parse_datetime("2020-02-03 04:05", "yyyy-MM-dd HH:mm")
datetime.datetime(2020, 2, 3, 4, 5)
"""

from __future__ import annotations

import datetime
import re
from typing import Any

__all__ = ["format_datetime", "parse_datetime"]

_CACHE: dict[str, list[tuple[str, int, str]]] = {}


def _tokens(pattern: str) -> list[tuple[str, int, str]]:
    """``(letter, count, literal)`` items: a field when ``letter``, else ``literal`` text."""
    cached = _CACHE.get(pattern)
    if cached is not None:
        return cached
    out: list[tuple[str, int, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:
                out.append(("", 0, "'"))
                i += 2
                continue
            end = len(pattern) if end < 0 else end
            out.append(("", 0, pattern[i + 1 : end]))
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            out.append((c, j - i, ""))
            i = j
        else:
            out.append(("", 0, c))
            i += 1
    _CACHE[pattern] = out
    return out


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _field(t: datetime.datetime, letter: str, n: int) -> str:
    if letter in "yY":
        year = t.year if letter == "y" else t.isocalendar()[0]
        return f"{year % 100:02d}" if n == 2 else f"{year:0{n}d}"
    if letter == "u":
        return str(t.isoweekday())
    if letter in "ML":
        if n >= 4:
            return _MONTHS[t.month - 1]
        if n == 3:
            return _MONTHS[t.month - 1][:3]
        return f"{t.month:0{n}d}"
    values = {
        "d": t.day,
        "H": t.hour,
        "k": t.hour or 24,
        "K": t.hour % 12,
        "h": t.hour % 12 or 12,
        "m": t.minute,
        "s": t.second,
        "D": t.timetuple().tm_yday,
        "w": t.isocalendar()[1],
    }
    if letter in values:
        return f"{values[letter]:0{n}d}"
    if letter == "S":
        return f"{t.microsecond:06d}{'0' * 3}"[:n] if n <= 9 else f"{t.microsecond:06d}"
    if letter == "E":
        name = _DAYS[t.weekday()]
        return name if n >= 4 else name[:3]
    if letter == "a":
        return "AM" if t.hour < 12 else "PM"
    if letter in "zZX":
        return {"z": "UTC", "Z": "+0000", "X": "Z"}[letter]
    raise ValueError(f"Unsupported date format letter {letter!r}")


def format_datetime(value: Any, pattern: str) -> str:
    """``value`` (a ``datetime`` or ``date``) written with a Java date pattern."""
    if not isinstance(value, datetime.datetime):
        value = datetime.datetime(value.year, value.month, value.day)
    return "".join(
        _field(value, letter, n) if letter else literal for letter, n, literal in _tokens(pattern)
    )


_PARSERS: dict[str, re.Pattern[str]] = {}
_WIDTH = {"y": r"\d{1,4}", "S": r"\d{1,9}", "a": "[AaPp][Mm]", "E": "[A-Za-z]+"}


def _parser(pattern: str) -> re.Pattern[str]:
    compiled = _PARSERS.get(pattern)
    if compiled is None:
        parts: list[str] = []
        seen: set[str] = set()
        for letter, n, literal in _tokens(pattern):
            if not letter:
                parts.append(re.escape(literal))
                continue
            group = letter if letter not in seen else f"{letter}{len(seen)}"
            seen.add(letter)
            if letter == "y" and n == 2:
                body = r"\d{2}"
            elif letter in "ML" and n >= 3:
                body = "[A-Za-z]+"
            elif letter in "zZX":
                body = r"Z|[+-]\d{2}:?\d{2}|[A-Za-z/_]+"
            else:
                body = _WIDTH.get(letter, rf"\d{{{min(n, 2)},2}}" if n <= 2 else rf"\d{{{n}}}")
            parts.append(f"(?P<{group}>{body})")
        compiled = _PARSERS[pattern] = re.compile("".join(parts))
    return compiled


def parse_datetime(text: str, pattern: str) -> datetime.datetime:
    """The naive (UTC) ``datetime`` that ``text`` spells in a Java date pattern."""
    found = _parser(pattern).fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} does not match the pattern {pattern!r}")
    g = {k: v for k, v in found.groupdict().items() if v is not None}
    year = int(g.get("y", 1970))
    if "y" in g and len(g["y"]) == 2:
        year += 2000
    month_text = g.get("M", g.get("L", "1"))
    if month_text.isdigit():
        month = int(month_text)
    else:
        month = [m[:3].lower() for m in _MONTHS].index(month_text[:3].lower()) + 1
    hour = int(g.get("H", g.get("k", 0))) % 24
    if "h" in g or "K" in g:
        hour = int(g.get("h", g.get("K", 0))) % 12
        if g.get("a", "AM").upper() == "PM":
            hour += 12
    fraction = g.get("S", "0")
    micros = int((fraction + "000000")[:6])
    value = datetime.datetime(
        year, month, int(g.get("d", 1)), hour, int(g.get("m", 0)), int(g.get("s", 0)), micros
    )
    zone = g.get("X", g.get("Z", g.get("z")))
    if zone and zone not in ("Z", "UTC", "GMT"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
        value -= sign * offset
    return value
