"""Flink's hash functions (``MD5``, ``SHA1``, ``SHA2``...): lower-case hex digests of a
string's UTF-8 bytes (or of BYTES).

Invariant: pure; NULL in, NULL out (the registry's rule); ``SHA2`` with a bit length other
than 224, 256, 384 or 512 is NULL, as Flink's.

>>> digest("md5", "")
'd41d8cd98f00b204e9800998ecf8427e'
"""

from __future__ import annotations

import hashlib
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, always_nullable, returns
from cairn.table.types import DataTypes

__all__ = ["FUNCTIONS", "digest"]


def digest(algorithm: str, value: Any) -> str:
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return hashlib.new(algorithm, data).hexdigest()


def sha2(value: Any, bits: int) -> str | None:
    if bits not in (224, 256, 384, 512):
        return None
    return digest(f"sha{bits}", value)


def _hash(name: str, digits: int, example: str) -> BuiltinFunction:
    return BuiltinFunction(
        name,
        (name.upper(),),
        f"{name.upper()}(string)",
        f"The {name.upper()} hash as {digits} hexadecimal digits.",
        "hash",
        returns(lambda n: DataTypes.STRING(n)),
        lambda v: digest(name, v),
        inputs="y",
        method=name,
        method_is_property=True,
        examples=(
            (f"{name.upper()}('')", example),
            (f"{name.upper()}(CAST(NULL AS STRING))", None),
        ),
    )


FUNCTIONS = [
    _hash("md5", 32, "d41d8cd98f00b204e9800998ecf8427e"),
    _hash("sha1", 40, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
    _hash("sha224", 56, "d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f"),
    _hash("sha256", 64, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    _hash(
        "sha384",
        96,
        "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edeb"
        "fe76f65fbd51ad2f14898b95b",
    ),
    _hash(
        "sha512",
        128,
        "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d1"
        "3c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
    ),
    BuiltinFunction(
        "sha2",
        ("SHA2",),
        "SHA2(string, bits)",
        "The SHA-2 hash of 224, 256, 384 or 512 bits (NULL for another length).",
        "hash",
        always_nullable(lambda n: DataTypes.STRING(n)),
        sha2,
        inputs="yi",
        method="sha2",
        examples=(
            ("SHA2('', 224)", "d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f"),
            ("SHA2('', 100)", None),
        ),
    ),
]
