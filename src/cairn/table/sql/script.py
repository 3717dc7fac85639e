"""A SQL script (``cairn sql -f job.sql``): its statements, in order, each with its line.

Invariant: splitting never looks inside a string literal (``'...'`` with ``''`` escapes), a
quoted identifier (`` `...` `` or ``"..."``) or a comment (``-- ...`` to the end of the line,
``/* ... */``), so a ``;`` there does not end a statement; a ``BEGIN STATEMENT SET; ... END;``
block (and ``EXECUTE STATEMENT SET BEGIN ... END``) is one statement, as Flink's SQL client
reads it (the first form given as the second, which ``execute_sql`` runs). Each statement
keeps the line it starts on, so an error inside it can be reported at its line in the file.
Comments and blank statements are dropped; a ``/*+ hint */`` is kept.

>>> for line, text in split_statements("CREATE TABLE t (a INT);\\n-- x; y\\nSELECT ';' FROM t;"):
...     print(line, text)
1 CREATE TABLE t (a INT)
3 SELECT ';' FROM t
"""

from __future__ import annotations

import re

__all__ = ["complete_part", "split_statements"]

_BEGIN = re.compile(r"^\s*(EXECUTE\s+)?(BEGIN\s+)?STATEMENT\s+SET\b", re.IGNORECASE)
_SET_START = re.compile(r"^\s*BEGIN\s+STATEMENT\s+SET\s*$", re.IGNORECASE)
_END = re.compile(r"^\s*END\s*$", re.IGNORECASE)


def split_statements(text: str) -> list[tuple[int, str]]:
    """The statements of ``text`` as ``(line, statement)``, without their ``;``."""
    pieces = _pieces(text)
    statements: list[tuple[int, str]] = []
    block: list[str] | None = None  # the parts of an open statement set
    block_line = 0
    for line, piece in pieces:
        stripped = piece.strip()
        if block is not None:
            block.append(stripped)
            if _END.match(stripped):
                if _SET_START.match(block[0]):  # the SQL client's form: one EXECUTE of it
                    block[0] = "EXECUTE STATEMENT SET BEGIN"
                    statements.append((block_line, block[0] + "\n" + ";\n".join(block[1:])))
                else:
                    statements.append((block_line, ";\n".join(block)))
                block = None
            continue
        if not stripped:
            continue
        if _SET_START.match(stripped) or (
            _BEGIN.match(stripped) and not stripped.upper().rstrip().endswith("END")
        ):
            block, block_line = [stripped], line
            continue
        statements.append((line, stripped))
    if block is not None:
        raise ValueError(f"line {block_line}: the statement set is not closed with END;")
    return statements


def complete_part(text: str) -> tuple[str, str]:
    """``text`` cut after its last ``;`` that ends a statement (outside strings, quoted names,
    comments and an open ``BEGIN STATEMENT SET``): the complete statements and the rest,
    still being typed. Text inside an unclosed quote or comment is all rest.

    >>> complete_part("SELECT 1; SELECT ';")
    ('SELECT 1;', " SELECT ';")
    """
    end = 0
    i = 0
    while True:
        j = text.find(";", i)
        if j < 0:
            break
        try:
            split_statements(text[: j + 1])
        except ValueError:  # a quote, comment or statement set still open at this ;
            i = j + 1
            continue
        last_piece = _pieces(text[: j + 1])[-1][1]
        if not last_piece.strip():
            end = j + 1
        i = j + 1
    return text[:end], text[end:]


def _pieces(text: str) -> list[tuple[int, str]]:
    """``text`` cut at each ``;`` outside strings, quoted names and comments; comments
    removed; each piece with the line of its first non-blank character."""
    pieces: list[tuple[int, str]] = []
    current: list[str] = []
    line = 1
    start: int | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch == "/" and text.startswith("/*", i) and not text.startswith("/*+", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError(f"line {line}: a /* comment is not closed")
            line += text.count("\n", i, end)
            i = end + 2
            continue
        if ch in "'`\"":
            end = _closing(text, i, ch)
            if end < 0:
                raise ValueError(f"line {line}: the quote {ch} opened here is not closed")
            if start is None:
                start = line
            current.append(text[i : end + 1])
            line += text.count("\n", i, end + 1)
            i = end + 1
            continue
        if ch == ";":
            pieces.append((start or line, "".join(current)))
            current, start = [], None
            i += 1
            continue
        if ch == "\n":
            line += 1
        elif start is None and not ch.isspace():
            start = line
        current.append(ch)
        i += 1
    pieces.append((start or line, "".join(current)))
    return pieces


def _closing(text: str, i: int, quote: str) -> int:
    """Where the quote opened at ``i`` closes (a doubled quote is an escaped one), or -1."""
    j = i + 1
    while True:
        j = text.find(quote, j)
        if j < 0:
            return -1
        if text.startswith(quote * 2, j):
            j += 2
            continue
        return j
