"""Flink's built-in scalar functions: one ``BuiltinFunction`` per function, in one module per
family (``string``, ``numeric``, ``temporal``, ``conditional``, ``json``, ``collection``,
``hashing``), indexed by ``registry``; ``doc`` writes ``docs/sql-functions.md`` from them."""
