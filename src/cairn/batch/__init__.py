"""BATCH execution (``execution.runtime-mode: BATCH``): a bounded job run stage by stage.

Invariant: the user-facing semantics are the streaming runtime's own operators
(``cairn.runtime.operators``, the heap keyed backend, the window operator), driven here over
sorted, fully materialized inputs instead of channels: ``plan`` decides the stages and
exchanges (pure), ``stage`` runs one stage's chain on one partition, and ``local`` /
``spark`` move the records between stages (in process, or as Spark shuffles).
"""
