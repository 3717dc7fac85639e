"""Flink's built-in string functions (``UPPER``, ``SPLIT_INDEX``, ``PARSE_URL``...; the
pattern matching ones are ``pattern``'s).

Invariant: each implementation is a pure function of non-NULL arguments (the registry's NULL
rule runs first), with Flink's (Java's) semantics: 1-based positions, Java regular expressions
(``$1`` group references in a replacement), NULL rather than an error where Flink returns
NULL (a group index out of range, a negative split index, an invalid pattern).

>>> split_index("Hello,World", ",", 1)
'World'
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, always_nullable, returns
from cairn.table.types import DataTypes, MapType

__all__ = ["FUNCTIONS", "split_index"]


def trim(s: str, chars: str = " ", leading: bool = True, trailing: bool = True) -> str:
    if leading:
        s = s.lstrip(chars)
    if trailing:
        s = s.rstrip(chars)
    return s


def _trim_call(where: str, chars: str, s: str) -> str:
    return trim(s, chars, where in ("BOTH", "LEADING"), where in ("BOTH", "TRAILING"))


def substring(s: str, begin: int, length: int | None = None) -> str | None:
    start = max(begin - 1, 0) if begin > 0 else max(len(s) + begin, 0)
    if length is None:
        return s[start:]
    if length < 0:
        return None
    return s[start : start + length]


def overlay(s: str, placing: str, start: int, length: int | None = None) -> str:
    count = len(placing) if length is None else length
    return s[: start - 1] + placing + s[start - 1 + count :]


def init_cap(s: str) -> str:
    return re.sub(r"[A-Za-z0-9]+", lambda m: m.group(0)[0].upper() + m.group(0)[1:].lower(), s)


def _pad(s: str, length: int, pad: str, left: bool) -> str | None:
    if length < 0 or pad == "":
        return None
    if length <= len(s):
        return s[:length]
    fill = (pad * (length // len(pad) + 1))[: length - len(s)]
    return fill + s if left else s + fill


def lpad(s: str, length: int, pad: str) -> str | None:
    return _pad(s, length, pad, True)


def rpad(s: str, length: int, pad: str) -> str | None:
    return _pad(s, length, pad, False)


def concat_ws(separator: str | None, *parts: Any) -> str | None:
    if separator is None:
        return None
    return separator.join(str(p) for p in parts if p is not None)


def chr_(code: int) -> str:
    if code < 0:
        return ""
    return chr(code & 0xFF)


_CHARSETS = {
    "US-ASCII": "ascii",
    "ISO-8859-1": "latin-1",
    "UTF-8": "utf-8",
    "UTF-16BE": "utf-16-be",
    "UTF-16LE": "utf-16-le",
    "UTF-16": "utf-16",
}


def _charset(name: str) -> str:
    codec = _CHARSETS.get(name.upper())
    if codec is None:
        raise ValueError(f"Unsupported character set {name!r}: use one of {', '.join(_CHARSETS)}")
    return codec


def decode(data: bytes, charset: str) -> str:
    return bytes(data).decode(_charset(charset))


def encode(s: str, charset: str) -> bytes:
    if charset.upper() == "UTF-16":  # Java writes a big-endian byte order mark
        return b"\xfe\xff" + s.encode("utf-16-be")
    return s.encode(_charset(charset))


def locate(needle: str, haystack: str, start: int = 1) -> int:
    if start < 1:
        return 0
    return haystack.find(needle, start - 1) + 1


def parse_url(url: str, part: str, key: str | None = None) -> str | None:
    try:
        parsed = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    part = part.upper()
    if key is not None:
        if part != "QUERY":
            return None
        found = re.search(r"(?:&|^)" + re.escape(key) + r"=([^&]*)", parsed.query)
        return None if found is None else found.group(1)
    user, _, _ = parsed.netloc.rpartition("@")
    values = {
        "HOST": parsed.hostname,
        "PATH": parsed.path,
        "QUERY": parsed.query or None,
        "REF": parsed.fragment or None,
        "PROTOCOL": parsed.scheme,
        "AUTHORITY": parsed.netloc,
        "FILE": parsed.path + ("?" + parsed.query if parsed.query else ""),
        "USERINFO": user or None,
    }
    return values.get(part)


def split_index(s: str, separator: str, index: int) -> str | None:
    if index < 0 or s == "":
        return None
    parts = s.split(separator) if separator else list(s)
    return parts[index] if index < len(parts) else None


def str_to_map(s: str, pair_delimiter: str = ",", key_delimiter: str = "=") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in re.split(pair_delimiter, s):
        kv = re.split(key_delimiter, pair, maxsplit=1)
        out[kv[0]] = kv[1] if len(kv) > 1 else None
    return out


def translate(s: str, source: str, target: str) -> str:
    table: dict[int, int | None] = {}
    for i, c in enumerate(source):
        table.setdefault(ord(c), ord(target[i]) if i < len(target) else None)
    return s.translate(table)


def elt(index: int | None, *values: Any) -> Any:
    if index is None:
        return None
    return values[index - 1] if 1 <= index <= len(values) else None


def _map_string(n: bool) -> MapType:
    return DataTypes.MAP(DataTypes.STRING(), DataTypes.STRING(), n)


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", returns(DataTypes.STRING))
    return BuiltinFunction(name, sql, signature, description, "string", result, **kwargs)


FUNCTIONS = [
    _fn(
        "concat",
        "CONCAT(string1, string2, ...)",
        "The strings joined; NULL if any is NULL.",
        implementation=lambda *p: "".join(str(x) for x in p),
        inputs="*+",
        arity=(1, None),
        examples=(
            ("CONCAT('AA', 'BB', 'CC')", "AABBCC"),
            ("'a' || 'b'", "ab"),
            ("CONCAT('a', CAST(NULL AS STRING))", None),
        ),
    ),
    _fn(
        "concat_ws",
        "CONCAT_WS(separator, string1, string2, ...)",
        "The strings joined by the separator, skipping NULLs; NULL if the separator is NULL.",
        implementation=concat_ws,
        inputs="s*+",
        arity=(1, None),
        strict=False,
        result=lambda types: DataTypes.STRING(types[0].nullable),
        examples=(("CONCAT_WS('~', 'AA', CAST(NULL AS STRING), 'BB', '', 'CC')", "AA~BB~~CC"),),
    ),
    _fn(
        "char_length",
        "CHAR_LENGTH(string)",
        "The number of characters.",
        sql=("CHAR_LENGTH", "CHARACTER_LENGTH"),
        implementation=len,
        inputs="s",
        result=returns(DataTypes.INT),
        method="char_length",
        method_is_property=True,
        examples=(("CHAR_LENGTH('hello')", 5), ("CHARACTER_LENGTH('')", 0)),
    ),
    _fn(
        "upper",
        "UPPER(string)",
        "The string in upper case.",
        implementation=str.upper,
        inputs="s",
        examples=(("UPPER('hi There')", "HI THERE"),),
    ),
    _fn(
        "lower",
        "LOWER(string)",
        "The string in lower case.",
        implementation=str.lower,
        inputs="s",
        examples=(("LOWER('Hi There')", "hi there"), ("LOWER(CAST(NULL AS STRING))", None)),
    ),
    _fn(
        "position",
        "POSITION(string1 IN string2)",
        "The 1-based position of string1's first occurrence in string2, 0 if absent.",
        sql=(),
        implementation=lambda needle, s: s.find(needle) + 1,
        inputs="ss",
        result=returns(DataTypes.INT),
        method="position",
        examples=(("POSITION('lo' IN 'hello')", 4), ("POSITION('x' IN 'hello')", 0)),
    ),
    _fn(
        "trim",
        "TRIM([BOTH | LEADING | TRAILING] [chars] FROM string)",
        "The string without the given characters (a space by default) at its ends.",
        sql=(),
        implementation=lambda s: s.strip(" "),
        inputs="s",
        examples=(("TRIM('  hi  ')", "hi"),),
    ),
    _fn(
        "trim_chars",
        "TRIM([BOTH | LEADING | TRAILING] chars FROM string)",
        "The string without the characters of chars at one or both ends.",
        sql=(),
        implementation=_trim_call,
        inputs="sss",
        literal_arguments=(0,),
        examples=(
            ("TRIM(BOTH 'x' FROM 'xxhixx')", "hi"),
            ("TRIM(LEADING 'x' FROM 'xxhixx')", "hixx"),
            ("TRIM(TRAILING FROM '  hi  ')", "  hi"),
        ),
    ),
    _fn(
        "ltrim",
        "LTRIM(string[, chars])",
        "The string without leading spaces (or chars).",
        implementation=lambda s, c=" ": s.lstrip(c),
        inputs="ss",
        arity=(1, 2),
        method="ltrim",
        method_is_property=True,
        examples=(("LTRIM(' This is a test String.')", "This is a test String."),),
    ),
    _fn(
        "rtrim",
        "RTRIM(string[, chars])",
        "The string without trailing spaces (or chars).",
        implementation=lambda s, c=" ": s.rstrip(c),
        inputs="ss",
        arity=(1, 2),
        method="rtrim",
        method_is_property=True,
        examples=(("RTRIM('This is a test String. ')", "This is a test String."),),
    ),
    _fn(
        "btrim",
        "BTRIM(string[, chars])",
        "The string without spaces (or chars) at both ends.",
        implementation=lambda s, c=" ": s.strip(c),
        inputs="ss",
        arity=(1, 2),
        method="btrim",
        examples=(
            ("BTRIM('  www.apache.org  ')", "www.apache.org"),
            ("BTRIM('/www.apache.org//', '/')", "www.apache.org"),
        ),
    ),
    _fn(
        "repeat",
        "REPEAT(string, integer)",
        "The string repeated integer times.",
        implementation=lambda s, n: s * max(n, 0),
        inputs="si",
        method="repeat",
        examples=(("REPEAT('ab', 3)", "ababab"), ("REPEAT('ab', -1)", "")),
    ),
    _fn(
        "overlay",
        "OVERLAY(string PLACING string2 FROM integer1 [FOR integer2])",
        "integer2 characters (string2's length by default) from integer1 replaced by string2.",
        implementation=overlay,
        inputs="ssii",
        arity=(3, 4),
        method="overlay",
        examples=(
            ("OVERLAY('xxxxxtest' PLACING 'xxxx' FROM 6)", "xxxxxxxxx"),
            ("OVERLAY('xxxxxtest' PLACING 'xxxx' FROM 6 FOR 2)", "xxxxxxxxxst"),
        ),
    ),
    _fn(
        "substring",
        "SUBSTRING(string FROM integer1 [FOR integer2])",
        "integer2 characters (all by default) from the 1-based position integer1.",
        sql=("SUBSTRING", "SUBSTR"),
        implementation=substring,
        inputs="sii",
        arity=(2, 3),
        examples=(
            ("SUBSTRING('hello' FROM 2 FOR 3)", "ell"),
            ("SUBSTR('hello', 2)", "ello"),
            ("SUBSTRING('hello', -3, 2)", "ll"),
        ),
    ),
    _fn(
        "replace",
        "REPLACE(string, search, replacement)",
        "Every (non-overlapping) occurrence of search replaced.",
        implementation=str.replace,
        inputs="sss",
        method="replace",
        examples=(
            ("REPLACE('hello world', 'world', 'flink')", "hello flink"),
            ("REPLACE('ababab', 'abab', 'z')", "zab"),
        ),
    ),
    _fn(
        "init_cap",
        "INITCAP(string)",
        "Each word's first character upper case, the rest lower case.",
        sql=("INITCAP",),
        implementation=init_cap,
        inputs="s",
        method="init_cap",
        method_is_property=True,
        examples=(("INITCAP('hello wORLD-x1y')", "Hello World-X1y"),),
    ),
    _fn(
        "lpad",
        "LPAD(string, length, pad)",
        "The string left-padded (or cut) to length.",
        implementation=lpad,
        inputs="sis",
        method="lpad",
        result=always_nullable(DataTypes.STRING),
        examples=(("LPAD('hi', 4, '??')", "??hi"), ("LPAD('hi', 1, '??')", "h")),
    ),
    _fn(
        "rpad",
        "RPAD(string, length, pad)",
        "The string right-padded (or cut) to length.",
        implementation=rpad,
        inputs="sis",
        method="rpad",
        result=always_nullable(DataTypes.STRING),
        examples=(("RPAD('hi', 4, '??')", "hi??"), ("RPAD('hi', 1, '??')", "h")),
    ),
    _fn(
        "from_base64",
        "FROM_BASE64(string)",
        "The base64-decoded string.",
        implementation=lambda s: base64.b64decode(s).decode("utf-8"),
        inputs="s",
        method="from_base64",
        method_is_property=True,
        examples=(("FROM_BASE64('aGVsbG8gd29ybGQ=')", "hello world"),),
    ),
    _fn(
        "to_base64",
        "TO_BASE64(string)",
        "The base64-encoded string.",
        implementation=lambda s: base64.b64encode(s.encode("utf-8")).decode("ascii"),
        inputs="s",
        method="to_base64",
        method_is_property=True,
        examples=(("TO_BASE64('hello world')", "aGVsbG8gd29ybGQ="),),
    ),
    _fn(
        "ascii",
        "ASCII(string)",
        "The code of the first character (0 for '').",
        implementation=lambda s: ord(s[0]) if s else 0,
        inputs="s",
        result=returns(DataTypes.INT),
        method="ascii",
        method_is_property=True,
        examples=(("ASCII('abc')", 97), ("ASCII(CAST(NULL AS VARCHAR))", None)),
    ),
    _fn(
        "chr",
        "CHR(integer)",
        "The character with the code integer modulo 256.",
        implementation=chr_,
        inputs="i",
        method="chr",
        method_is_property=True,
        examples=(("CHR(97)", "a"), ("CHR(353)", "a")),
    ),
    _fn(
        "decode",
        "DECODE(binary, charset)",
        "The bytes decoded with the character set.",
        implementation=decode,
        inputs="*s",
        method="decode",
        examples=(("DECODE(ENCODE('héllo', 'UTF-8'), 'UTF-8')", "héllo"),),
    ),
    _fn(
        "encode",
        "ENCODE(string, charset)",
        "The string encoded with the character set.",
        implementation=encode,
        inputs="ss",
        method="encode",
        result=returns(lambda n: DataTypes.BYTES(n)),
        examples=(("ENCODE('hi', 'US-ASCII')", b"hi"),),
    ),
    _fn(
        "instr",
        "INSTR(string, search)",
        "The 1-based position of search, 0 if absent.",
        implementation=lambda s, needle: s.find(needle) + 1,
        inputs="ss",
        method="instr",
        result=returns(DataTypes.INT),
        examples=(("INSTR('hello', 'l')", 3),),
    ),
    _fn(
        "left",
        "LEFT(string, integer)",
        "The leftmost integer characters ('' if negative).",
        implementation=lambda s, n: s[: max(n, 0)],
        inputs="si",
        method="left",
        examples=(("LEFT('hello', 2)", "he"), ("LEFT('hello', -1)", "")),
    ),
    _fn(
        "right",
        "RIGHT(string, integer)",
        "The rightmost integer characters ('' if negative).",
        implementation=lambda s, n: s[max(len(s) - n, 0) :] if n > 0 else "",
        inputs="si",
        method="right",
        examples=(("RIGHT('hello', 2)", "lo"), ("RIGHT('hello', 9)", "hello")),
    ),
    _fn(
        "locate",
        "LOCATE(search, string[, integer])",
        "The 1-based position of search in string from position integer, 0 if absent.",
        implementation=locate,
        inputs="ssi",
        arity=(2, 3),
        method="locate",
        result=returns(DataTypes.INT),
        examples=(("LOCATE('l', 'hello')", 3), ("LOCATE('l', 'hello', 4)", 4)),
    ),
    _fn(
        "parse_url",
        "PARSE_URL(url, part[, key])",
        "A part of the URL (HOST, PATH, QUERY, REF, PROTOCOL, AUTHORITY, FILE, USERINFO), or"
        " the value of a query parameter.",
        implementation=parse_url,
        inputs="sss",
        arity=(2, 3),
        method="parse_url",
        result=always_nullable(DataTypes.STRING),
        examples=(
            (
                "PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'HOST')",
                "facebook.com",
            ),
            ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'QUERY', 'k1')", "v1"),
        ),
    ),
    _fn(
        "reverse",
        "REVERSE(string)",
        "The string reversed.",
        implementation=lambda s: s[::-1],
        inputs="s",
        method="reverse",
        method_is_property=True,
        examples=(("REVERSE('abc')", "cba"),),
    ),
    _fn(
        "split_index",
        "SPLIT_INDEX(string, separator, index)",
        "The index-th (0-based) part of the string split by separator; NULL out of range.",
        implementation=split_index,
        inputs="ssi",
        method="split_index",
        result=always_nullable(DataTypes.STRING),
        examples=(
            ("SPLIT_INDEX('Hello,World', ',', 1)", "World"),
            ("SPLIT_INDEX('Hello,World', ',', 2)", None),
            ("SPLIT_INDEX('https://www.nexmark.com/a/b/item.htm', '/', 3)", "a"),
        ),
    ),
    _fn(
        "str_to_map",
        "STR_TO_MAP(string[, pairDelimiter, keyValueDelimiter])",
        "A map of the pairs (delimiters are regular expressions; ',' and '=' by default).",
        implementation=str_to_map,
        inputs="sss",
        arity=(1, 3),
        method="str_to_map",
        result=returns(_map_string),
        examples=(
            ("STR_TO_MAP('a=1,b=2')", {"a": "1", "b": "2"}),
            ("STR_TO_MAP('a:1;b', ';', ':')", {"a": "1", "b": None}),
        ),
    ),
    _fn(
        "translate",
        "TRANSLATE(string, from, to)",
        "Each character of from replaced by the one at its position in to (removed if none).",
        implementation=translate,
        inputs="sss",
        method="translate",
        examples=(("TRANSLATE('www.apache.org', 'wapcheorg', ' APCHEcom')", "   .APACHE.com"),),
    ),
    _fn(
        "elt",
        "ELT(index, expr1, expr2, ...)",
        "The index-th (1-based) expression; NULL when out of range.",
        implementation=elt,
        inputs="i*+",
        arity=(2, None),
        strict=False,
        method=None,
        result=lambda types: types[1].nullable_(),
        examples=(("ELT(2, 'a', 'b', 'c')", "b"), ("ELT(4, 'a', 'b', 'c')", None)),
    ),
    _fn(
        "starts_with",
        "STARTSWITH(string, prefix)",
        "TRUE when the string starts with prefix.",
        sql=("STARTSWITH",),
        implementation=lambda s, p: s.startswith(p),
        inputs="yy",
        method="starts_with",
        result=returns(DataTypes.BOOLEAN),
        examples=(("STARTSWITH('SparkSQL', 'Spark')", True),),
    ),
    _fn(
        "ends_with",
        "ENDSWITH(string, suffix)",
        "TRUE when the string ends with suffix.",
        sql=("ENDSWITH",),
        implementation=lambda s, p: s.endswith(p),
        inputs="yy",
        method="ends_with",
        result=returns(DataTypes.BOOLEAN),
        examples=(("ENDSWITH('SparkSQL', 'SQL')", True), ("ENDSWITH('SparkSQL', 'Spark')", False)),
    ),
]
