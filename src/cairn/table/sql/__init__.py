"""Flink SQL on Cairn's table planner: parse (``parse.py`` over the sqlglot dialect of
``dialect.py``), convert to Table API calls (``convert.py``), run statements
(``statements.py``).

Invariant: SQL has no planner of its own — a query becomes the same ``Expression`` trees and
``Table`` operations a Table API program builds, so both give the same plan and results.
"""
